package rawjson

// Edits are changes to a text, made in one pass that builds one new text: each replaces the
// bytes b[From:To] with Text (an insertion when From == To, a deletion when Text is empty).
// Several edits of one body (a member dropped, one replaced, one added) cost one copy of it,
// not one each. Edits must not overlap. The zero Edits is empty and ready; it holds a few
// edits without allocating.
type Edits struct {
	n    int
	list [4]Edit // the first edits: a body gets a few at most
	more []Edit  // the rest
}

// Edit is one replacement.
type Edit struct {
	From, To int
	Text     string
}

// Replace adds the edit b[from:to] = text.
func (e *Edits) Replace(from, to int, text string) {
	ed := Edit{From: from, To: to, Text: text}
	if e.n < len(e.list) {
		e.list[e.n] = ed
		e.n++
		return
	}
	e.more = append(e.more, ed)
}

// Len is how many edits there are.
func (e *Edits) Len() int { return e.n + len(e.more) }

// sorted returns the edits in the order of the text, those at one offset in the order they
// were added.
func (e *Edits) sorted() []Edit {
	s := e.list[:e.n]
	if len(e.more) > 0 {
		s = append(append([]Edit(nil), s...), e.more...)
	}
	for i := 1; i < len(s); i++ { // insertion sort: stable, and there are a few
		for j := i; j > 0 && s[j].From < s[j-1].From; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s
}

// Apply returns b with the edits made: a new slice, allocated once at its size; b itself when
// there are none.
func (e *Edits) Apply(b []byte) []byte {
	if e.Len() == 0 {
		return b
	}
	edits := e.sorted()
	n := len(b)
	for _, ed := range edits {
		n += len(ed.Text) - (ed.To - ed.From)
	}
	out := make([]byte, 0, n)
	at := 0
	for _, ed := range edits {
		out = append(out, b[at:ed.From]...)
		out = append(out, ed.Text...)
		at = ed.To
	}
	return append(out, b[at:]...)
}

// Moved is where the byte at offset i of the text before the edits is after them, for an i
// that no edit replaced (an edit that ends at i, or inserts there, comes before it).
func (e *Edits) Moved(i int) int {
	at := i
	for _, ed := range e.list[:e.n] {
		if ed.To <= i && ed.From <= i {
			at += len(ed.Text) - (ed.To - ed.From)
		}
	}
	for _, ed := range e.more {
		if ed.To <= i && ed.From <= i {
			at += len(ed.Text) - (ed.To - ed.From)
		}
	}
	return at
}
