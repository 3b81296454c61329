package h1

import (
	"bytes"
	"net/http"
	"testing"
)

// FuzzResponse: no input panics the response parser or makes it hold more memory than its
// bounds; reading byte by byte gives what reading at once gives; and every answer it accepts,
// net/http accepts too and reads the same way (status, fields, length, body, keep-alive).
// Where net/http accepts more, we refuse on purpose (doc.go lists the cases; TestSmuggling
// pins each). The corpus in testdata/fuzz/FuzzResponse holds well-formed answers of the
// shapes model servers send and every smuggling case.
func FuzzResponse(f *testing.F) {
	for _, raw := range wellFormed {
		f.Add([]byte(raw), false)
	}
	f.Fuzz(func(t *testing.T, raw []byte, head bool) {
		method := http.MethodGet
		if head {
			method = http.MethodHead
		}
		agree(t, raw, method)

		hr := headReader{br: newReader(bytes.NewReader(raw))}
		hr.read(method)
		if cap(hr.block) > 2*maxHeadBytes+8<<10 || len(hr.fields) > maxFields {
			t.Fatalf("head scratch grew to %d bytes and %d fields", cap(hr.block), len(hr.fields))
		}
	})
}
