package usage

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// run feeds the pieces to a fresh tap of mode m and returns all it passed on and its counts.
func run(m Mode, pieces ...[]byte) ([]byte, Counts) {
	var t Tap
	return runTap(&t, m, pieces...)
}

func runTap(t *Tap, m Mode, pieces ...[]byte) ([]byte, Counts) {
	t.Reset(m)
	var out []byte
	for _, p := range pieces {
		out = append(out, t.Write(p)...)
	}
	out = append(out, t.Close()...)
	return out, t.Counts()
}

// modes are the modes a sample runs in, with the output each must give.
func (s sample) modes() map[Mode]string {
	if s.mode == JSON {
		return map[Mode]string{JSON: s.body}
	}
	strip := s.strip
	if strip == "" {
		strip = s.body
	}
	return map[Mode]string{Stream: s.body, StreamStrip: strip}
}

func TestSamples(t *testing.T) {
	for _, s := range samples {
		for m, want := range s.modes() {
			out, c := run(m, []byte(s.body))
			if c != s.want {
				t.Errorf("%s (mode %d): counts %+v, want %+v", s.name, m, c, s.want)
			}
			if string(out) != want {
				t.Errorf("%s (mode %d): output\n%q\nwant\n%q", s.name, m, out, want)
			}
		}
	}
}

func TestJSONSamplesAreJSON(t *testing.T) {
	for _, s := range samples {
		if s.mode == JSON && s.want.Seen && !json.Valid([]byte(s.body)) {
			t.Errorf("%s: not JSON", s.name)
		}
	}
}

// TestWriteReturnsInput: in JSON and Stream modes Write hands back the very slice it got.
func TestWriteReturnsInput(t *testing.T) {
	for _, m := range []Mode{JSON, Stream} {
		var tap Tap
		tap.Reset(m)
		b := []byte(anthropicStream)
		for i := 0; i < len(b); i += 100 {
			p := b[i:min(i+100, len(b))]
			if got := tap.Write(p); len(got) != len(p) || len(p) > 0 && &got[0] != &p[0] {
				t.Fatalf("mode %d: Write did not return its input", m)
			}
		}
		if got := tap.Close(); len(got) != 0 {
			t.Fatalf("mode %d: Close returned %q", m, got)
		}
	}
}

// TestStripPassesCompleteEvents: StreamStrip passes every complete event at once and holds
// back only the incomplete tail.
func TestStripPassesCompleteEvents(t *testing.T) {
	var tap Tap
	tap.Reset(StreamStrip)
	body := openAIStream + openAIUsageChunk + done
	cut := len(openAIStream) + 10
	if got := string(tap.Write([]byte(body[:cut]))); got != openAIStream {
		t.Fatalf("first Write passed %q", got)
	}
	if got := string(tap.Write([]byte(body[cut:]))); got != done {
		t.Fatalf("second Write passed %q", got)
	}
	if got := tap.Close(); len(got) != 0 {
		t.Fatalf("Close passed %q", got)
	}
	if c := tap.Counts(); c != (Counts{19, 10, true}) {
		t.Fatalf("counts %+v", c)
	}
}

// TestStripKeepsFraming: StreamStrip's output is well-framed SSE, and its events are the
// input's, the usage chunk dropped and usage members removed from the data of the others.
func TestStripKeepsFraming(t *testing.T) {
	for _, s := range samples {
		if s.mode == JSON {
			continue
		}
		out, _ := run(StreamStrip, []byte(s.body))
		in := sseEvents(t, s.body)
		var got, want []string
		for _, d := range sseEvents(t, string(out)) {
			got = append(got, canon(t, d))
		}
		for _, d := range in {
			if d, ok := withoutUsageRef(t, d); ok {
				want = append(want, canon(t, d))
			}
		}
		if strings.Join(got, "\x00") != strings.Join(want, "\x00") {
			t.Errorf("%s: events\n%q\nwant\n%q", s.name, got, want)
		}
	}
}

// sseEvents is a reference SSE reader (lines split on \r\n or \n): the data of each event
// that has any, in order.
func sseEvents(t *testing.T, s string) []string {
	var out, data []string
	has := false
	lines := strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
	for i, line := range lines {
		last := i == len(lines)-1
		if line == "" || last {
			if last && line != "" {
				if v, ok := strings.CutPrefix(line, "data:"); ok {
					data, has = append(data, strings.TrimPrefix(v, " ")), true
				}
			}
			if has {
				out = append(out, strings.Join(data, "\n"))
			}
			data, has = nil, false
			continue
		}
		if v, ok := strings.CutPrefix(line, "data:"); ok {
			data, has = append(data, strings.TrimPrefix(v, " ")), true
		} else if line == "data" {
			data, has = append(data, ""), true
		}
	}
	return out
}

// withoutUsageRef is the reference of StreamStrip on one event's data, with encoding/json:
// ok is false when it is dropped; an edited one is compared as re-encoded JSON.
func withoutUsageRef(t *testing.T, d string) (string, bool) {
	var obj map[string]json.RawMessage
	if !strings.Contains(d, `"usage"`) || json.Unmarshal([]byte(d), &obj) != nil {
		return d, true
	}
	u, ok := obj["usage"]
	if !ok || string(u) == "null" {
		return d, true
	}
	c := strings.Join(strings.Fields(string(obj["choices"])), "")
	if c == "[]" {
		return "", false
	}
	if !strings.HasPrefix(c, "[") {
		return d, true
	}
	delete(obj, "usage")
	return canon(t, obj), true
}

// canon re-encodes JSON text or a value, so that texts of equal values compare equal.
func canon(t *testing.T, v any) string {
	if s, ok := v.(string); ok {
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			return s
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var back any
	json.Unmarshal(b, &back)
	b, _ = json.Marshal(back)
	return string(b)
}

// TestReuse: a tap reset for another answer forgets the last one.
func TestReuse(t *testing.T) {
	var tap Tap
	runTap(&tap, StreamStrip, []byte(openAIStream+openAIUsageChunk[:40]))
	for _, s := range samples {
		for m, want := range s.modes() {
			out, c := runTap(&tap, m, []byte(s.body))
			if c != s.want || string(out) != want {
				t.Errorf("%s (mode %d) on a reused tap: %+v %q", s.name, m, c, out)
			}
		}
	}
}

func TestUnknownModeIsStream(t *testing.T) {
	out, c := run(Mode(9), []byte(openAIStream+openAIUsageChunk))
	if string(out) != openAIStream+openAIUsageChunk || c != (Counts{19, 10, true}) {
		t.Fatalf("%+v %q", c, out)
	}
}

// TestLongEvent: an event longer than maxEvent is passed on untouched, in every mode, and
// its usage still counts when it sits in its last maxTail bytes.
func TestLongEvent(t *testing.T) {
	text := strings.Repeat("lorem ipsum ", maxEvent/10)
	completed := `event: response.completed` + "\n" +
		`data: {"type":"response.completed","response":{"output":[{"content":[{"type":"output_text","text":"` + text +
		`"}]}],"usage":{"input_tokens":12,"output_tokens":34000,"total_tokens":34012},"user":null,"metadata":{}}}` + "\n\n"
	longChunk := `data: {"choices":[{"index":0,"delta":{"content":"` + text + `"}}],"usage":{"prompt_tokens":1,"completion_tokens":2}}` + "\n\n"
	for _, tc := range []struct {
		body string
		want Counts
	}{
		{completed, Counts{12, 34000, true}},
		{longChunk + done, Counts{1, 2, true}},
		{`data: {"usage":{"prompt_tokens":1},"choices":[{"delta":{"content":"` + text + `"}}]}` + "\n\n", Counts{}},
	} {
		for _, m := range []Mode{Stream, StreamStrip} {
			for _, step := range []int{len(tc.body), 1000, 4097, maxEvent} {
				var tap Tap
				out, c := runChecked(t, &tap, m, pieces([]byte(tc.body), step)...)
				if string(out) != tc.body || c != tc.want {
					t.Errorf("mode %d step %d: counts %+v want %+v, output changed: %v", m, step, c, tc.want, string(out) != tc.body)
				}
			}
		}
	}
}

// TestJSONTail: a body longer than the tail is read at its end only.
func TestJSONTail(t *testing.T) {
	pad := strings.Repeat("x", 3*maxTail)
	late := `{"data":"` + pad + `","usage":{"prompt_tokens":4,"total_tokens":4}}`
	early := `{"usage":{"prompt_tokens":4,"total_tokens":4},"data":"` + pad + `"}`
	for _, step := range []int{1, 7, 1000, maxTail, len(late)} {
		if _, c := run(JSON, pieces([]byte(late), step)...); c != (Counts{4, 0, true}) {
			t.Errorf("usage at the end, step %d: %+v", step, c)
		}
		if _, c := run(JSON, pieces([]byte(early), step)...); c.Seen {
			t.Errorf("usage out of the tail, step %d: %+v", step, c)
		}
	}
}

func pieces(b []byte, step int) [][]byte {
	var out [][]byte
	for len(b) > step {
		out = append(out, b[:step])
		b = b[step:]
	}
	return append(out, b)
}

// TestRing: the ring keeps the last maxTail bytes, whatever the writes.
func TestRing(t *testing.T) {
	var all []byte
	var r ring
	for i, n := range []int{0, 5, maxTail - 3, 1, 2, 7000, maxTail, 3 * maxTail, 9, maxTail - 1, 10} {
		p := bytes.Repeat([]byte{byte('a' + i)}, n)
		for j := range p {
			p[j] += byte(j % 3)
		}
		all = append(all, p...)
		r.write(p)
		want := all[max(len(all)-maxTail, 0):]
		if got := r.bytes(); !bytes.Equal(got, want) || cap(r.buf) > maxTail {
			t.Fatalf("after %d writes: wrong tail (cap %d)", i+1, cap(r.buf))
		}
	}
}

// TestEventBound: an event of maxEvent bytes is parsed, one byte more is not (its usage,
// at its start, is out of its tail), however it is cut.
func TestEventBound(t *testing.T) {
	head := `data: {"usage":{"prompt_tokens":1,"completion_tokens":2},"choices":[{"delta":{"content":"`
	foot := `"}}]}` + "\n\n"
	for _, n := range []int{maxEvent - 1, maxEvent, maxEvent + 1} {
		ev := head + strings.Repeat("a", n-len(head)-len(foot)) + foot
		want := Counts{1, 2, true}
		if n > maxEvent {
			want = Counts{}
		}
		for _, m := range []Mode{Stream, StreamStrip} {
			for _, step := range []int{len(ev), len(ev) - 1, 1000, 7} {
				var tap Tap
				out, c := runChecked(t, &tap, m, pieces([]byte(ev), step)...)
				if c != want {
					t.Errorf("%d bytes, mode %d, step %d: %+v, want %+v", n, m, step, c, want)
				}
				if stripped := m == StreamStrip && n <= maxEvent; stripped == (string(out) == ev) {
					t.Errorf("%d bytes, mode %d, step %d: stripped %v", n, m, step, !stripped)
				}
			}
		}
	}
}

// TestCloseTwice: a second Close passes nothing on and keeps the counts.
func TestCloseTwice(t *testing.T) {
	for _, s := range samples {
		for m := range s.modes() {
			var tap Tap
			tap.Reset(m)
			tap.Write([]byte(s.body))
			tap.Close()
			if out := tap.Close(); len(out) != 0 || tap.Counts() != s.want {
				t.Errorf("%s (mode %d): second Close gave %q, counts %+v", s.name, m, out, tap.Counts())
			}
		}
	}
}
