// Package translatetest makes request bodies for measuring translation: the memory test of
// the server and modelrelay-bench's translation tool send the same shapes.
package translatetest

import (
	"fmt"
	"strings"
)

// ManyBlocks is a request body of about size bytes, valid in both API families: one user
// message of text blocks with texts of textLen bytes (a text block is written alike in both).
func ManyBlocks(model string, size, textLen int) []byte {
	b := make([]byte, 0, size+textLen+64)
	b = append(b, `{"model":"`+model+`","max_tokens":16,"messages":[{"role":"user","content":[`...)
	filler := strings.Repeat("lorem ipsum ", textLen/12+1)[:textLen-8]
	for i := 0; len(b) < size-textLen-64; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, `{"type":"text","text":"w%07d%s"}`, i, filler)
	}
	return append(b, "]}]}"...)
}
