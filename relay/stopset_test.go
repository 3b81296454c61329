package relay

import (
	"context"
	"errors"
	"testing"
)

func TestStopSet(t *testing.T) {
	var s stopSet
	cause := errors.New("stop")
	served, servedCancel := context.WithCancelCause(context.Background())
	left, leftCancel := context.WithCancelCause(context.Background())
	s.add(servedCancel)
	s.remove(s.add(leftCancel)) // a request that ended before the stop
	s.stop(cause)
	if context.Cause(served) != cause {
		t.Fatalf("a request served at the stop ended with %v, want the stop's cause", context.Cause(served))
	}
	if left.Err() != nil {
		t.Fatal("a request that had left was cancelled")
	}
	late, lateCancel := context.WithCancelCause(context.Background())
	if s.remove(s.add(lateCancel)); context.Cause(late) != cause {
		t.Fatalf("a request that started after the stop ended with %v, want the stop's cause", context.Cause(late))
	}
	s.stop(errors.New("again")) // a second stop changes nothing
	if s.stopped != cause {
		t.Fatalf("cause %v after a second stop", s.stopped)
	}
}
