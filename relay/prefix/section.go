package prefix

import "encoding/binary"

// maxText is as much canonical text as the blocks can cover: a section holds no more (give
// or take a record's few bytes), so the parse of a huge body turns into skipping.
const maxText = MaxBlocks * BlockSize

// section is one part of the canonical text, built as the body is read: the body may hold
// its parts in any order (messages before tools, say), the blocks need them in canonical
// order. Each section starts as if it opened the text; assemble fixes the one seam where
// that matters.
type section struct {
	buf  []byte
	last byte // the letter of the last record: a run of text continues only its own role
}

func (s *section) reset() {
	s.buf = s.buf[:0]
	s.last = 0
}

func (s *section) full() bool { return len(s.buf) >= maxText }

// record starts a record with its tag letter.
func (s *section) record(tag byte) {
	s.buf = append(s.buf, recordStart, tag)
	s.last = tag
}

// item starts one piece of a run of text of role: it continues the run when the last record
// is that run, else it opens one.
func (s *section) item(role byte) {
	if s.last == role {
		s.buf = append(s.buf, '\n', '\n')
		return
	}
	s.record(role)
}

// text writes the raw content of a JSON string, unescaped.
func (s *section) text(raw []byte) {
	s.buf = appendUnescaped(s.buf, raw, false, maxText)
}

// raw writes b as it is, as much of it as the section has room for.
func (s *section) raw(b []byte) {
	s.buf = append(s.buf, b[:min(len(b), max(maxText-len(s.buf), 0))]...)
}

// quoted writes the raw content of a JSON string as a canonical JSON string.
func (s *section) quoted(raw []byte) {
	s.buf = append(s.buf, '"')
	s.buf = appendUnescaped(s.buf, raw, true, maxText)
	s.buf = append(s.buf, '"')
}

// insert writes text at offset at, moving what follows.
func (s *section) insert(at int, text string) {
	n := len(s.buf)
	s.buf = append(s.buf, text...)
	copy(s.buf[at+len(text):], s.buf[at:n])
	copy(s.buf[at:], text)
}

// marker writes a media marker: a letter and a hash.
func (s *section) marker(kind byte, h uint64) {
	s.buf = append(s.buf, fieldSep, kind)
	s.buf = binary.LittleEndian.AppendUint64(s.buf, h)
}

// mark and rewind undo what was written since mark: for a value written as it was read and
// then found to be something else (a server tool, invalid arguments).
type sectionMark struct {
	n    int
	last byte
}

func (s *section) mark() sectionMark { return sectionMark{len(s.buf), s.last} }

func (s *section) rewind(m sectionMark) { s.buf, s.last = s.buf[:m.n], m.last }
