package prefix

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"unicode/utf16"
)

// node is a JSON value that keeps its members' order, so tests can send one body in other
// forms: members in another order, indented, escaped differently.
type node struct {
	kind byte // '{', '[', '"' or 'l' (a number or literal, as sent)
	keys []string
	vals []*node
	s    string
}

func parseNode(t testing.TB, body []byte) *node {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	n, err := decodeNode(dec)
	if err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	return n
}

func decodeNode(dec *json.Decoder) (*node, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch v := tok.(type) {
	case json.Delim:
		n := &node{kind: byte(v)}
		for dec.More() {
			if n.kind == '{' {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				n.keys = append(n.keys, k.(string))
			}
			e, err := decodeNode(dec)
			if err != nil {
				return nil, err
			}
			n.vals = append(n.vals, e)
		}
		if _, err := dec.Token(); err != nil && err != io.EOF {
			return nil, err
		}
		return n, nil
	case string:
		return &node{kind: '"', s: v}, nil
	case json.Number:
		return &node{kind: 'l', s: v.String()}, nil
	case nil:
		return &node{kind: 'l', s: "null"}, nil
	default:
		return &node{kind: 'l', s: fmt.Sprint(v)}, nil
	}
}

// form says how to write a body out.
type form struct {
	reverse bool // members in reverse order (except inside schemas and tool inputs, where order is content)
	indent  bool
	ascii   bool // every non-ASCII character and '/' escaped, as Python's json.dumps does
}

func (n *node) encode(f form) []byte {
	var b bytes.Buffer
	n.write(&b, f, 0, false)
	return b.Bytes()
}

func (n *node) write(b *bytes.Buffer, f form, depth int, keep bool) {
	nl := func(d int) {
		if f.indent {
			b.WriteString("\n" + strings.Repeat("  ", d))
		}
	}
	switch n.kind {
	case '{', '[':
		b.WriteByte(n.kind)
		order := make([]int, len(n.vals))
		for i := range order {
			order[i] = i
			if f.reverse && !keep && n.kind == '{' {
				order[i] = len(n.vals) - 1 - i
			}
		}
		for j, i := range order {
			if j > 0 {
				b.WriteByte(',')
			}
			nl(depth + 1)
			k := ""
			if n.kind == '{' {
				k = n.keys[i]
				writeString(b, k, f.ascii)
				b.WriteString(": ")
			}
			n.vals[i].write(b, f, depth+1, keep || k == "parameters" || k == "input_schema" || k == "input")
		}
		if len(n.vals) > 0 {
			nl(depth)
		}
		b.WriteByte(n.kind + 2) // '{'+2 is '}', '['+2 is ']'
	case '"':
		writeString(b, n.s, f.ascii)
	default:
		b.WriteString(n.s)
	}
}

func writeString(b *bytes.Buffer, s string, ascii bool) {
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r < 0x20:
			fmt.Fprintf(b, `\u%04x`, r)
		case ascii && r == '/':
			b.WriteString(`\/`)
		case ascii && r > 0x7e:
			if r > 0xffff {
				r1, r2 := utf16.EncodeRune(r)
				fmt.Fprintf(b, `\u%04x\u%04x`, r1, r2)
			} else {
				fmt.Fprintf(b, `\u%04X`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

// formBodies are bodies of every shape the parser reads.
func formBodies() map[string][]byte {
	bodies := map[string][]byte{}
	for i, rounds := range []int{1, 4} {
		c := agentConv(uint64(20+i), rounds, 400)
		bodies[fmt.Sprint("openai-", rounds)] = c.openAI()
		bodies[fmt.Sprint("anthropic-", rounds)] = c.anthropic()
	}
	for _, tc := range canonicalCases {
		bodies[tc.name] = []byte(tc.body)
	}
	return bodies
}

// A body's blocks depend on what it says, not on how its JSON is written: the order of its
// members (which decides what the parser reads as it goes and what it keeps for later),
// whitespace, and escapes.
func TestBodyFormDoesNotMatter(t *testing.T) {
	forms := []form{{reverse: true}, {indent: true}, {ascii: true}, {true, true, true}}
	for name, body := range formBodies() {
		want, _ := canonical(t, body)
		root := parseNode(t, body)
		for _, f := range forms {
			other := root.encode(f)
			got, _ := canonical(t, other)
			if !bytes.Equal(got, want) {
				t.Errorf("%s in form %+v:\n got %q\nwant %q\nbody %s", name, f, got, want, other)
			}
		}
	}
}
