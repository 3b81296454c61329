package daemon

import (
	"bytes"
	"testing"
	"unicode/utf8"
)

func TestRuneCutter(t *testing.T) {
	tests := []struct {
		name  string
		reads []string
		want  []string // what cut returns per read, then flush
	}{
		{"ascii", []string{"ab", "cd"}, []string{"ab", "cd", ""}},
		{"two-byte split", []string{"h\xc3", "\xa9!"}, []string{"h", "\xc3\xa9!", ""}},
		{"four-byte split thrice", []string{"\xf0", "\x9f", "\x98", "\x80x"}, []string{"", "", "", "😀x", ""}},
		{"three-byte split after two", []string{"a\xe2\x82", "\xac"}, []string{"a", "€", ""}},
		{"truncated at end", []string{"ok\xe2\x82"}, []string{"ok", "\xe2\x82"}},
		{"invalid lead passes", []string{"a\xff", "b"}, []string{"a\xff", "b", ""}},
		{"stray continuations pass", []string{"\x80\x80\x80\x80"}, []string{"\x80\x80\x80\x80", ""}},
		{"invalid second byte passes", []string{"\xe0\x80"}, []string{"\xe0\x80", ""}},
		{"empty read", []string{"\xc3", "", "\xa9"}, []string{"", "", "é", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c runeCutter
			var got []string
			for _, r := range tt.reads {
				got = append(got, string(c.cut([]byte(r))))
			}
			got = append(got, string(c.flush()))
			if len(got) != len(tt.want) {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("got %q, want %q", got, tt.want)
				}
			}
		})
	}
}

// FuzzRuneCutter splits data into reads at the positions cuts suggests and checks that the
// pieces add up to the input and, for valid input, that every piece is valid UTF-8.
func FuzzRuneCutter(f *testing.F) {
	f.Add([]byte("héllo 😀 wörld"), []byte{1, 2, 3})
	f.Add([]byte("\xf0\x9f\x98\x80"), []byte{1, 1, 1, 1})
	f.Add([]byte("a\xffb\xc3"), []byte{2})
	f.Fuzz(func(t *testing.T, data, cuts []byte) {
		var c runeCutter
		var out bytes.Buffer
		valid := utf8.Valid(data)
		check := func(piece []byte) {
			if valid && !utf8.Valid(piece) {
				t.Fatalf("piece %q of valid input %q is invalid", piece, data)
			}
			out.Write(piece)
		}
		rest := data
		for i := 0; len(rest) > 0; i++ {
			n := len(rest)
			if len(cuts) > 0 {
				n = min(int(cuts[i%len(cuts)])%8+1, len(rest))
			}
			check(c.cut(rest[:n]))
			rest = rest[n:]
		}
		tail := c.flush()
		if valid && len(tail) != 0 {
			t.Fatalf("valid input %q left %q carried", data, tail)
		}
		check(tail)
		if !bytes.Equal(out.Bytes(), data) {
			t.Fatalf("pieces %q != input %q", out.Bytes(), data)
		}
	})
}
