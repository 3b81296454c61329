package rawjson

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

var scanCases = []string{
	`{}`, `[]`, `""`, `0`, `-0`, `1.5e-3`, `-12E+4`, `true`, `false`, `null`, ` {"a" : [1, "x", {"b":null}] } `,
	`"\u00e9\ud83d\ude00\"\\\/\b\f\n\r\t"`, `"\ud800"`, `"\udc00\ud800x"`, "\"\xff\xfe\"", `"é ü 漢字"`,
	`{"a":1,}`, `[1,]`, `{"a"}`, `{"a":}`, `{a:1}`, `[1 2]`, `{"a":1 "b":2}`, `01`, `1.`, `.5`, `-`, `1e`, `+1`,
	`"\x"`, `"\u12g4"`, `"\u123"`, "\"a\x01\"", "\"a\x1f\"", "\"tab\there\"", `"abc`, `"abc\"`, `tru`, `nul`, `True`,
	`{"a":1}}`, `[[]`, `]`, `}`, ``, ` `, "\f{}", `{} {}`, `"` + strings.Repeat("long text ", 40) + `"`,
	`"` + strings.Repeat("x", 7) + `\n` + strings.Repeat("y", 9) + `"`, "\"0123456\x7f89\"",
}

// TestValidAgreesWithEncodingJSON: the scanner's grammar is encoding/json's.
func TestValidAgreesWithEncodingJSON(t *testing.T) {
	for _, c := range scanCases {
		if got, want := Valid([]byte(c)), json.Valid([]byte(c)); got != want {
			t.Errorf("Valid(%q) = %v, json.Valid %v", c, got, want)
		}
	}
	// Nesting: as deep as encoding/json goes, and not one level deeper.
	for _, depth := range []int{MaxDepth, MaxDepth + 1} {
		for _, open := range []string{"[", `{"a":`} {
			close := "]"
			if open != "[" {
				close = "}"
			}
			b := []byte(strings.Repeat(open, depth) + "1" + strings.Repeat(close, depth))
			if got, want := Valid(b), json.Valid(b); got != want {
				t.Errorf("%d levels of %s: Valid %v, json.Valid %v", depth, open, got, want)
			}
		}
	}
}

// FuzzValid: Valid agrees with json.Valid; SkipValue never reads past the text it says the
// value is; an object's members are what encoding/json decodes; strings decode as
// encoding/json decodes them.
func FuzzValid(f *testing.F) {
	for _, c := range scanCases {
		f.Add([]byte(c))
	}
	f.Add([]byte(`{"Model":"m","m\u006fdel":"x","ſtream":true,"K":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := Valid(b), json.Valid(b); got != want {
			t.Fatalf("Valid(%q) = %v, json.Valid %v", b, got, want)
		}
		i := SkipSpace(b, 0)
		end, ok := SkipValue(b, i)
		if ok && (end <= i || end > len(b) || !json.Valid(b[i:end])) {
			t.Fatalf("SkipValue(%q) = %d", b, end)
		}
		if e := ValueEnd(b, i); e > len(b) || (Valid(b) && e != end) {
			t.Fatalf("ValueEnd(%q) = %d, SkipValue %d %v", b, e, end, ok)
		}
		if !json.Valid(b) {
			return
		}
		switch b[i] {
		case '{':
			checkMembers(t, b, i)
		case '"':
			var want string
			json.Unmarshal(b, &want)
			end, _ := SkipString(b, i)
			if got := String(b[i:end]); got != want && utf8.ValidString(want) && utf8.Valid(b) {
				t.Fatalf("String(%q) = %q, encoding/json %q", b, got, want)
			}
		}
	})
}

// checkMembers reads the object at b[i] as Object does and as encoding/json does.
func checkMembers(t *testing.T, b []byte, i int) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b[i:]))
	dec.Token()
	o := ObjectAt(b, i, Unchecked)
	checked := ObjectAt(b, i, Checked)
	var m, cm Member
	for o.Next(&m) {
		if !checked.Next(&cm) || cm.Start != m.Start || cm.Value != m.Value || cm.End != m.End {
			t.Fatalf("%q: in checked text, member %+v; unchecked %+v", b, cm, m)
		}
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("%q: encoding/json ran out of members at %s", b, m.Key)
		}
		var raw json.RawMessage
		dec.Decode(&raw)
		name := tok.(string)
		if utf8.Valid(b) && String(m.Key) != name {
			t.Fatalf("%q: name %q, encoding/json %q", b, String(m.Key), name)
		}
		if !KeyIs(m.Key, name) && len(name) <= 64 && utf8.Valid(b) {
			t.Fatalf("%q: KeyIs(%s, %q) false", b, m.Key, name)
		}
		if !bytes.Equal(compact(b[m.Value:m.End]), compact(raw)) {
			t.Fatalf("%q: value %s, encoding/json %s", b, b[m.Value:m.End], raw)
		}
		for _, field := range []string{"model", "stream", "k"} {
			var v map[string]json.RawMessage
			json.Unmarshal([]byte(`{`+string(m.Key)+`:1}`), &v)
			var s struct {
				Model  *int `json:"model"`
				Stream *int `json:"stream"`
				K      *int `json:"k"`
			}
			json.Unmarshal([]byte(`{`+string(m.Key)+`:1}`), &s)
			want := map[string]bool{"model": s.Model != nil, "stream": s.Stream != nil, "k": s.K != nil}[field]
			if len(String(m.Key)) <= 64 && FieldIs(m.Key, field) != want {
				t.Fatalf("FieldIs(%s, %q) = %v, encoding/json %v", m.Key, field, !want, want)
			}
			var buf [8]byte
			if folded := string(FoldKey(m.Key, buf[:0])) == field; folded != want {
				t.Fatalf("FoldKey(%s) = %q, encoding/json says %q %v", m.Key, FoldKey(m.Key, nil), field, want)
			}
		}
	}
	if o.End() < 0 || checked.Next(&cm) || checked.End() != o.End() {
		t.Fatalf("%q: a valid object not read to its end", b)
	}
	if _, err := dec.Token(); err != nil {
		t.Fatalf("%q: encoding/json found more members", b)
	}
}

func compact(b []byte) []byte {
	var out bytes.Buffer
	json.Compact(&out, b)
	return out.Bytes()
}

func TestArray(t *testing.T) {
	b := []byte(` [ 1 , "a,]" , {"b":[2]} , [] ] `)
	a := ArrayAt(b, 1, Unchecked)
	var got []string
	for {
		start, end, ok := a.Next()
		if !ok {
			break
		}
		got = append(got, string(b[start:end]))
	}
	if strings.Join(got, "|") != `1|"a,]"|{"b":[2]}|[]` || a.End() != len(b)-1 {
		t.Fatalf("elements %q, end %d", got, a.End())
	}
	for _, bad := range []string{`[1,]`, `[1 2]`, `[1`, `[,1]`, `{}`} {
		a := ArrayAt([]byte(bad), 0, Unchecked)
		for _, _, ok := a.Next(); ok; _, _, ok = a.Next() {
		}
		if a.End() >= 0 {
			t.Errorf("%s read as an array", bad)
		}
	}
}

func TestKeyNames(t *testing.T) {
	for _, c := range []struct {
		key, name     string
		is, field, fk bool
	}{
		{`"model"`, "model", true, true, true},
		{`"m\u006fdel"`, "model", true, true, true},
		{`"Model"`, "model", false, true, true},
		{`"MODEL"`, "model", false, true, true},
		{`"ſtream"`, "stream", false, true, true},
		{`"\u017ftream"`, "stream", false, true, true},
		{`"models"`, "model", false, false, false},
		{`"mode"`, "model", false, false, false},
		{`"\u212a"`, "k", false, true, true},
	} {
		key := []byte(c.key)
		if KeyIs(key, c.name) != c.is || FieldIs(key, c.name) != c.field || (string(FoldKey(key, nil)) == c.name) != c.fk {
			t.Errorf("%s against %q: KeyIs %v FieldIs %v FoldKey %q", c.key, c.name, KeyIs(key, c.name), FieldIs(key, c.name), FoldKey(key, nil))
		}
	}
}

func TestEdits(t *testing.T) {
	b := []byte(`{"a":1,"b":2,"c":3}`)
	var e Edits
	if got := e.Apply(b); &got[0] != &b[0] {
		t.Fatal("no edits copied the text")
	}
	e.Replace(18, 18, `,"d":4`) // after the last member
	e.Replace(6, 12, "")        // ,"b":2
	e.Replace(1, 6, `"a":"x"`)
	if got := string(e.Apply(b)); got != `{"a":"x","c":3,"d":4}` {
		t.Fatalf("got %s", got)
	}
	if at := e.Moved(13); at != 9 { // "c"
		t.Fatalf(`"c" moved to %d`, at)
	}
}

func TestManyEdits(t *testing.T) {
	b := []byte("abcdefghij")
	var e Edits
	for i := 9; i >= 0; i -= 2 { // five edits out of order, and one more: past the first four
		e.Replace(i, i+1, strings.ToUpper(string(b[i])))
	}
	e.Replace(0, 0, "<")
	if got := string(e.Apply(b)); got != "<aBcDeFgHiJ" || e.Len() != 6 || e.Moved(2) != 3 {
		t.Fatalf("got %s, %d edits, c moved to %d", got, e.Len(), e.Moved(2))
	}
}
