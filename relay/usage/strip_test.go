package usage

import "testing"

func TestWithoutUsage(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"choices":[1],"usage":{"prompt_tokens":1}}`, `{"choices":[1]}`},
		{`{"usage":{"prompt_tokens":1},"choices":[1]}`, `{"choices":[1]}`},
		{`{"a":1, "usage": {}, "b":2}`, `{"a":1, "b":2}`},
		{"{\n  \"a\": 1,\n  \"usage\": {\"x\": 2}\n}", "{\n  \"a\": 1\n}"},
		{"{ \"usage\": {}, \"a\": 1 }", "{ \"a\": 1 }"},
		{`{"usage":{}}`, `{}`},
		{`{"usage":null,"a":1}`, `{"usage":null,"a":1}`},
		{`{"usage":{},"usage":{},"a":1,"usage":3}`, `{"a":1}`},
		{`{"a":{"usage":{}},"usage":[]}`, `{"a":{"usage":{}}}`},
	} {
		if got := string(withoutUsage(nil, []byte(tc.in))); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestRewriteEvent(t *testing.T) {
	for _, tc := range []struct{ ev, data, want string }{
		{"data: {\"a\":1,\"usage\":{}}\n\n", `{"a":1}`, "data: {\"a\":1}\n\n"},
		{"data:{\"a\":1,\"usage\":{}}\r\n\r\n", `{"a":1}`, "data:{\"a\":1}\r\n\r\n"},
		{"event: x\r\nid: 3\r\ndata: {\"a\":1,\r\ndata: \"usage\":{}}\r\n\r\n", "{\"a\":1\n}",
			"event: x\r\nid: 3\r\ndata: {\"a\":1\r\ndata: }\r\n\r\n"},
		{"data:{\"a\":1,\n: note\ndata:  \"usage\":{}}\n\n", "{\"a\":1\n }", "data:{\"a\":1\ndata:  }\n: note\n\n"},
		{"data: {\"a\":1,\"usage\":{}}", `{"a":1}`, "data: {\"a\":1}"},
		// the event's unterminated last line was data: the data lines take the first's end
		{"data: {\"a\":1,\ndata: \"usage\":{}}", "{\"a\":1\n}", "data: {\"a\":1\ndata: }\n"},
		{"data: {\"a\":1,\r\n: c\ndata: \"usage\":{}}", "{\"a\":1\n}", "data: {\"a\":1\r\ndata: }\r\n: c\n"},
	} {
		if got := string(rewriteEvent(nil, []byte(tc.ev), []byte(tc.data))); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.ev, got, tc.want)
		}
	}
}

// TestStripCases: StreamStrip on single events.
func TestStripCases(t *testing.T) {
	const kept = "kept"
	for _, tc := range []struct{ in, want string }{
		// the usage chunk, spaced, with an id and a comment: dropped whole
		{"id: 9\n: c\ndata: {\"choices\": [ ], \"usage\": {\"prompt_tokens\": 1}}\n\n" + done, done},
		// usage first in a content chunk
		{"data: {\"usage\":{\"prompt_tokens\":1},\"choices\":[{\"delta\":{}}]}\n\n", "data: {\"choices\":[{\"delta\":{}}]}\n\n"},
		// no choices (not an OpenAI chunk)
		{"data: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":1}}\n\n", kept},
		// choices not an array
		{"data: {\"choices\":{},\"usage\":{\"prompt_tokens\":1}}\n\n", kept},
		// usage null in the usage chunk
		{"data: {\"choices\":[],\"usage\":null}\n\n", kept},
		// a usage that is not an object is not counted, but still not asked for
		{"data: {\"choices\":[],\"usage\":7}\n\n", ""},
		// invalid JSON
		{"data: {\"choices\":[],\"usage\":{}\n\n", kept},
		// "usage" in content only
		{"data: {\"choices\":[{\"delta\":{\"content\":\"\\\"usage\\\": {}\"}}],\"usage\":null}\n\n", kept},
	} {
		want := tc.want
		if want == kept {
			want = tc.in
		}
		if out, _ := run(StreamStrip, []byte(tc.in)); string(out) != want {
			t.Errorf("%q: got %q, want %q", tc.in, out, want)
		}
	}
}

func TestFramer(t *testing.T) {
	for _, tc := range []struct {
		in   string
		cuts []int // event lengths
	}{
		{"a\n\nb\n\n", []int{3, 3}},
		{"a\r\n\r\nb\r\n\n", []int{5, 4}},
		{"a\n\r\nb\r\n\nc", []int{4, 4}},
		{"\n\na\n\n", []int{1, 1, 3}},
		{"\r\n", []int{2}},
		{"a\r\rb\n\r\r\n\n", []int{9}},
		{"a\rb\r\r\nc", nil},
		{"data: x\n", nil},
	} {
		for step := 1; step <= len(tc.in); step++ {
			var f framer
			var got []int
			n := 0
			for _, p := range pieces([]byte(tc.in), step) {
				for len(p) > 0 {
					k := f.cut(p)
					if k < 0 {
						n += len(p)
						break
					}
					got = append(got, n+k)
					n, p = 0, p[k:]
				}
			}
			if len(got) != len(tc.cuts) {
				t.Fatalf("%q step %d: events %v, want %v", tc.in, step, got, tc.cuts)
			}
			for i := range got {
				if got[i] != tc.cuts[i] {
					t.Fatalf("%q step %d: events %v, want %v", tc.in, step, got, tc.cuts)
				}
			}
		}
	}
}

func TestReadTail(t *testing.T) {
	for _, tc := range []struct {
		tail string
		want Counts
	}{
		{`ng text","usage":{"prompt_tokens":3,"completion_tokens":4}}`, Counts{3, 4, true}},
		{`"usage" : {"input_tokens":3} , "x":"\"usage\": {\"input_tokens\":9}"}`, Counts{3, 0, true}},
		{`"usage":{"input_tokens":3},"k":"a \"usage": 1}`, Counts{3, 0, true}},
		{`"usage":{"input_tokens":3},"a":{"usage":5}}`, Counts{}},
		{`"usage":{"input_tokens":3},"type":"usage"}`, Counts{3, 0, true}},
		{`"usage":{"input_tokens":3,"output_tokens":`, Counts{}},
		{`"usage":[{"input_tokens":3}]}`, Counts{}},
		{`"usage": {}}`, Counts{0, 0, true}},
		{`"usage":{"prompt_tokens":0,"input_tokens":5,"completion_tokens":1,"output_tokens":9}}`, Counts{0, 1, true}},
	} {
		var r tally
		r.readTail([]byte(tc.tail))
		if c := r.counts(); c != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.tail, c, tc.want)
		}
	}
}
