package rawjson

import "slices"

// Edits are changes to a text, made in one pass that builds one new text: each replaces the
// bytes b[From:To] with Text (an insertion when From == To, a deletion when Text is empty).
// Several edits of one body (a member dropped, one replaced, one added) cost one copy of it,
// not one each. Edits must not overlap.
type Edits struct {
	list []Edit
	room [4]Edit // the list's first backing store: a body gets a few edits at most
}

// Edit is one replacement.
type Edit struct {
	From, To int
	Text     string
}

// Replace adds the edit b[from:to] = text.
func (e *Edits) Replace(from, to int, text string) {
	if e.list == nil {
		e.list = e.room[:0]
	}
	e.list = append(e.list, Edit{From: from, To: to, Text: text})
}

// Len is how many edits there are.
func (e *Edits) Len() int { return len(e.list) }

// Apply returns b with the edits made: a new slice, allocated once at its size; b itself when
// there are none. Edits at the same offset are made in the order they were added.
func (e *Edits) Apply(b []byte) []byte {
	if len(e.list) == 0 {
		return b
	}
	slices.SortStableFunc(e.list, func(x, y Edit) int { return x.From - y.From })
	n := len(b)
	for _, ed := range e.list {
		n += len(ed.Text) - (ed.To - ed.From)
	}
	out := make([]byte, 0, n)
	at := 0
	for _, ed := range e.list {
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
	for _, ed := range e.list {
		if ed.To <= i && ed.From <= i {
			at += len(ed.Text) - (ed.To - ed.From)
		}
	}
	return at
}
