package relay

import (
	"slices"
	"strings"
	"testing"
)

func TestHoldSink(t *testing.T) {
	fits := strings.Repeat("a", maxErrorBody-10)
	for _, tc := range []struct {
		name               string
		refusals, failures bool
		answer             answerOf
		want               []string // what passed on
		held               int      // the status held (0: none)
		refusal            bool
		heldLen            int
		over               bool
	}{
		{name: "a success passes", refusals: true, failures: true,
			answer: answerOf{status: 200, length: 2, chunks: []string{"ok"}},
			want:   []string{"head 200 2", `chunk "ok" false`, "end"}},
		{name: "a 429 is held", failures: true,
			answer: answerOf{status: 429, length: 4, chunks: []string{"busy"}}, held: 429, heldLen: 4},
		{name: "a 5xx is held", failures: true,
			answer: answerOf{status: 503, length: -1, chunks: []string{"down", "!"}}, held: 503, heldLen: 5},
		{name: "a 5xx passes when nothing may move on", refusals: true,
			answer: answerOf{status: 500, length: 1, chunks: []string{"x"}},
			want:   []string{"head 500 1", `chunk "x" false`, "end"}},
		{name: "a 4xx other than a refusal passes", refusals: true, failures: true,
			answer: answerOf{status: 400, length: 1, chunks: []string{"x"}},
			want:   []string{"head 400 1", `chunk "x" false`, "end"}},
		{name: "a probe's 404 is a refusal", refusals: true, failures: true,
			answer: answerOf{status: 404, length: 1, chunks: []string{"x"}}, held: 404, refusal: true, heldLen: 1},
		{name: "a probe's 405 is a refusal", refusals: true,
			answer: answerOf{status: 405}, held: 405, refusal: true},
		{name: "a probe's 501 is a refusal, not a failure", refusals: true, failures: true,
			answer: answerOf{status: 501}, held: 501, refusal: true},
		{name: "a 404 to a request sent as the target speaks passes", failures: true,
			answer: answerOf{status: 404, length: 1, chunks: []string{"x"}},
			want:   []string{"head 404 1", `chunk "x" false`, "end"}},
		{name: "a refusal is held within its bound, never written", refusals: true,
			answer: answerOf{status: 404, length: -1, chunks: []string{fits, strings.Repeat("b", 20)}},
			held:   404, refusal: true, heldLen: maxErrorBody, over: true},
		{name: "a failure too large to hold goes on as the target sent it", failures: true,
			answer: answerOf{status: 500, length: int64(len(fits)) + 20, chunks: []string{fits, strings.Repeat("b", 20)}, stream: true},
			want:   []string{"head 500 65546", "chunk len=65526 false", `chunk "bbbbbbbbbbbbbbbbbbbb" true`, "end"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r recorder
			var h holdSink
			if err := tc.answer.into(h.wrap(&r, tc.refusals, tc.failures)); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(r.got, tc.want) {
				t.Errorf("passed %q, want %q", r.got, tc.want)
			}
			if tc.held == 0 {
				if k := h.take(); k != nil {
					t.Errorf("held %d", k.status)
				}
				return
			}
			if tc.refusal {
				if k := h.refusal(); k == nil {
					t.Fatal("no refusal held")
				} else {
					h.held = k
				}
			} else if h.refusal() != nil {
				t.Fatal("a failure taken as a refusal")
			}
			k := h.take()
			if k == nil || k.status != tc.held || k.refusal != tc.refusal || len(k.body) != tc.heldLen || k.over != tc.over ||
				k.length != tc.answer.length {
				t.Fatalf("held %+v, want status %d refusal %v body %d over %v", k, tc.held, tc.refusal, tc.heldLen, tc.over)
			}
			if h.take() != nil {
				t.Fatal("take leaves nothing behind")
			}
		})
	}
}

// TestHoldSinkDrop: a target that broke off leaves no answer to give.
func TestHoldSinkDrop(t *testing.T) {
	var r recorder
	var h holdSink
	s := h.wrap(&r, false, true)
	s.Head(502, nil, -1)
	s.Chunk([]byte("partial"), false)
	h.drop()
	if h.take() != nil || len(r.got) != 0 {
		t.Fatalf("after drop: held %v, passed %q", h.held, r.got)
	}
	// The next attempt's chain starts empty.
	h.wrap(&r, false, true)
	if h.held != nil {
		t.Fatal("wrap kept an earlier hold")
	}
}
