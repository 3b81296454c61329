package prefix

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"modelrelay/relay/rawjson"
)

// FuzzParse: no body panics the parser or gives more than MaxBlocks; a reused Parser gives
// what a fresh one does; the blocks are the hashes of the canonical text; every JSON object
// is accepted; and ParseTop, given the top level as a first read finds it, gives what Parse
// does. The corpus holds hand-made bodies of every dialect and captures of
// Claude Code's and the SDKs' traffic (the same as relay/translate's).
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	f.Add([]byte(`{"model":"m","max_tokens":8,"system":"s","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`))
	var reused Parser
	var dst Prompt
	f.Fuzz(func(t *testing.T, body []byte) {
		var fresh Parser
		var text []byte
		fresh.c.text = &text
		var want Prompt
		err := fresh.Parse(body, &want)
		if len(want.Blocks) > MaxBlocks {
			t.Fatalf("%d blocks", len(want.Blocks))
		}
		if gotErr := reused.Parse(body, &dst); (gotErr == nil) != (err == nil) ||
			!slices.Equal(dst.Blocks, want.Blocks) || dst.Session != want.Session {
			t.Fatalf("a reused Parser gives %v %x %q, a fresh one %v %x %q",
				gotErr, dst.Blocks, dst.Session, err, want.Blocks, want.Session)
		}
		if err != nil {
			// (JSON's own whitespace only: a form feed is not JSON, whatever Unicode says.)
			if trimmed := bytes.Trim(body, " \t\r\n"); json.Valid(trimmed) && trimmed[0] == '{' {
				t.Fatalf("a JSON object refused: %v", err)
			}
			return
		}
		if !slices.Equal(want.Blocks, chainOf(text)) {
			t.Fatalf("blocks are not the hashes of the canonical text")
		}
		if start := rawjson.SkipSpace(body, 0); rawjson.Valid(body) && body[start] == '{' {
			var top Top
			o := rawjson.ObjectAt(body, start, rawjson.Unchecked)
			var m rawjson.Member
			for o.Next(&m) {
				top.Add(&m)
			}
			var got Prompt
			reused.ParseTop(body, &top, &got)
			if !slices.Equal(got.Blocks, want.Blocks) || got.Session != want.Session {
				t.Fatalf("ParseTop gives %x %q, Parse %x %q", got.Blocks, got.Session, want.Blocks, want.Session)
			}
		}
	})
}
