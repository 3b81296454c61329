package relay

import (
	"errors"
	"slices"
	"testing"
	"time"
)

func TestCommitSink(t *testing.T) {
	for _, tc := range []struct {
		name    string
		expired bool // the request timeout won the race first
	}{{"the first head wins", false}, {"the timeout won", true}} {
		t.Run(tc.name, func(t *testing.T) {
			var r recorder
			c := commitSink{arrival: time.Now().Add(-time.Millisecond)}
			s := c.wrap(&r)
			if tc.expired && !c.expire() {
				t.Fatal("nothing was sent, yet the timeout lost")
			}
			body, err := s.Head(200, nil, -1)
			if tc.expired {
				if !errors.Is(err, errRequestTimeout) || len(r.got) != 0 || c.done || c.ttfb != 0 {
					t.Fatalf("after the timeout: err %v, passed %q, done %v", err, r.got, c.done)
				}
				return
			}
			if err != nil || !c.done || c.ttfb < time.Millisecond {
				t.Fatalf("err %v done %v ttfb %v", err, c.done, c.ttfb)
			}
			if body != &r {
				t.Fatal("the body passes the commit")
			}
			if c.expire() {
				t.Fatal("the timeout won after the head")
			}
			ttfb := c.ttfb
			// A later head (a sink that held the answer whole) passes as it is.
			if _, err := s.Head(200, nil, 5); err != nil || c.ttfb != ttfb {
				t.Fatalf("second head: %v, ttfb %v then %v", err, ttfb, c.ttfb)
			}
			s.Chunk([]byte("x"), true)
			s.End()
			if want := []string{"head 200 -1", "head 200 5", `chunk "x" true`, "end"}; !slices.Equal(r.got, want) {
				t.Fatalf("passed %q, want %q", r.got, want)
			}
		})
	}
}
