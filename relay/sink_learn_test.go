package relay

import (
	"modelrelay/relay/endpoint"
	"slices"
	"strconv"
	"testing"
	"time"
)

func TestLearnSink(t *testing.T) {
	for _, tc := range []struct {
		status int
		learns bool
	}{{200, true}, {201, true}, {400, false}, {404, false}, {429, false}, {500, false}} {
		sp := newSpeech(nil)
		var r recorder
		l := learnSink{dialect: Anthropic}
		a := answerOf{status: tc.status, length: 2, chunks: []string{"{}"}}
		if err := a.into(l.wrap(&r, sp)); err != nil {
			t.Fatal(err)
		}
		if want := []string{"head " + strconv.Itoa(tc.status) + " 2", `chunk "{}" false`, "end"}; !slices.Equal(r.got, want) {
			t.Errorf("%d: passed %q, want %q", tc.status, r.got, want)
		}
		speaks := sp.plan(Anthropic, endpoint.RouteMessages, time.Now()) == planNative
		if speaks != tc.learns {
			t.Errorf("%d: the target speaks Anthropic: %v, want %v", tc.status, speaks, tc.learns)
		}
		if sp.plan(OpenAI, endpoint.RouteChat, time.Now()) != planProbe {
			t.Errorf("%d: learned about the other family", tc.status)
		}
	}
}
