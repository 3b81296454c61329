package relay

import (
	"strings"
	"testing"

	"modelrelay/relay/usage"
)

const (
	tapChunk = "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n"
	tapUsage = "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2,\"total_tokens\":7}}\n\n"
	tapJSON  = `{"id":"c","object":"chat.completion","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`
)

func TestTapSink(t *testing.T) {
	counted := usage.Counts{Input: 5, Output: 2, Seen: true}
	for _, tc := range []struct {
		name         string
		strip        bool // the relay asked for the usage chunk, the client did not
		untranslated bool
		answer       answerOf
		want         string // the body that passed on
		counts       usage.Counts
	}{
		{name: "a whole answer is read as it passes",
			answer: answerOf{status: 200, header: jsonHead, chunks: []string{tapJSON[:30], tapJSON[30:]}},
			want:   tapJSON, counts: counted},
		{name: "a failure is not read",
			answer: answerOf{status: 500, header: jsonHead, chunks: []string{tapJSON}},
			want:   tapJSON},
		{name: "a stream is read as it passes", untranslated: true,
			answer: answerOf{status: 200, header: sseHead, stream: true, chunks: []string{tapChunk, tapUsage, "data: [DONE]\n\n"}},
			want:   tapChunk + tapUsage + "data: [DONE]\n\n", counts: counted},
		{name: "the usage chunk the client did not ask for is taken out", strip: true, untranslated: true,
			answer: answerOf{status: 200, header: sseHead, stream: true, chunks: []string{tapChunk, tapUsage, "data: [DONE]\n\n"}},
			want:   tapChunk + "data: [DONE]\n\n", counts: counted},
		{name: "an unterminated last event is held until the end", strip: true, untranslated: true,
			answer: answerOf{status: 200, header: sseHead, stream: true, chunks: []string{tapChunk, tapUsage, "data: [DONE]"}},
			want:   tapChunk + "data: [DONE]", counts: counted},
		{name: "a translated stream has nothing to take out", strip: true,
			answer: answerOf{status: 200, header: sseHead, stream: true, chunks: []string{tapChunk, tapUsage}},
			want:   tapChunk + tapUsage, counts: counted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r recorder
			tp := tapSink{usage: new(usage.Tap), strip: tc.strip}
			if err := tc.answer.into(tp.wrap(&r, tc.untranslated)); err != nil {
				t.Fatal(err)
			}
			if string(r.body) != tc.want {
				t.Errorf("passed %q, want %q", r.body, tc.want)
			}
			if r.got[len(r.got)-1] != "end" {
				t.Errorf("End did not pass: %q", r.got)
			}
			if c := tp.counts(); c != tc.counts {
				t.Errorf("counts %+v, want %+v", c, tc.counts)
			}
		})
	}
}

// TestTapSinkCountsWithoutEnd: an answer cut short still reports what it said so far, and a
// request that followed no answer reports nothing of the pooled tap's last one.
func TestTapSinkCountsWithoutEnd(t *testing.T) {
	tap := new(usage.Tap)
	first := tapSink{usage: tap}
	answerOf{status: 200, header: jsonHead, chunks: []string{tapJSON}}.into(first.wrap(&recorder{}, true))
	second := tapSink{usage: tap}
	s := second.wrap(&recorder{}, true)
	if c := second.counts(); c.Seen {
		t.Fatalf("a request that followed nothing counts %+v", c)
	}
	s.Head(200, sseHead, -1)
	s.Chunk([]byte(tapChunk+strings.TrimSuffix(tapUsage, "\n")), true)
	if c := second.counts(); c.Input != 5 || c.Output != 2 {
		t.Fatalf("cut short: counts %+v", c)
	}
}
