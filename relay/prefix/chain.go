package prefix

import "github.com/cespare/xxhash/v2"

const (
	BlockSize = 256 // bytes of canonical prompt text per block
	MaxBlocks = 256 // blocks hashed at most: the first 64 KiB of canonical text
)

// Record tags of the canonical text (see the package documentation).
const (
	recordStart = 0x1E
	fieldSep    = 0x1F

	roleSystem    = 's'
	roleUser      = 'u'
	roleAssistant = 'a'
	tagTool       = 't'
	tagCall       = 'c'
	tagResult     = 'r'

	markImage = 'i'
	markOther = 'x'
)

// chain hashes the canonical text as it is written: block i's hash is the xxhash64 of the
// text's first (i+1)*BlockSize bytes, so it stands for the whole prefix up to the block's
// end. One running digest, summed at each block's end, hashes every byte once and copies
// none.
type chain struct {
	d      xxhash.Digest
	n      int // bytes of the current block written
	blocks []uint64
	text   *[]byte // tests only: a copy of everything written
}

func (c *chain) reset(blocks []uint64) {
	c.blocks = blocks[:0]
	c.n = 0
	c.d.Reset()
}

// full says no more text can change the blocks.
func (c *chain) full() bool { return len(c.blocks) >= MaxBlocks }

func (c *chain) write(b []byte) {
	if c.text != nil {
		*c.text = append(*c.text, b...)
	}
	for len(b) > 0 && !c.full() {
		k := min(len(b), BlockSize-c.n)
		c.d.Write(b[:k])
		b = b[k:]
		if c.n += k; c.n == BlockSize {
			c.blocks = append(c.blocks, c.d.Sum64())
			c.n = 0
		}
	}
}

func (c *chain) writeString(s string) {
	if c.text != nil {
		*c.text = append(*c.text, s...)
	}
	for len(s) > 0 && !c.full() {
		k := min(len(s), BlockSize-c.n)
		c.d.WriteString(s[:k])
		s = s[k:]
		if c.n += k; c.n == BlockSize {
			c.blocks = append(c.blocks, c.d.Sum64())
			c.n = 0
		}
	}
}
