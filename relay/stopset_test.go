package relay

import (
	"context"
	"errors"
	"testing"
)

func TestStopSet(t *testing.T) {
	var s stopSet
	cause := errors.New("stop")
	served := newCallCtx(context.Background())
	left := newCallCtx(context.Background())
	s.add(served)
	s.remove(s.add(left)) // a request that ended before the stop
	s.stop(cause)
	if causeOf(served) != cause {
		t.Fatalf("a request served at the stop ended with %v, want the stop's cause", causeOf(served))
	}
	if left.Err() != nil {
		t.Fatal("a request that had left was cancelled")
	}
	late := newCallCtx(context.Background())
	if s.remove(s.add(late)); causeOf(late) != cause {
		t.Fatalf("a request that started after the stop ended with %v, want the stop's cause", causeOf(late))
	}
	s.stop(errors.New("again")) // a second stop changes nothing
	for i := range s.shards {
		if s.shards[i].stopped != cause {
			t.Fatalf("shard %d: cause %v after a second stop", i, s.shards[i].stopped)
		}
	}
}

// Requests spread over every shard are all ended by a stop, including those that register
// while it runs.
func TestStopSetEndsEveryShard(t *testing.T) {
	var s stopSet
	cause := errors.New("stop")
	var ctxs []context.Context
	for range 3 * stopShards {
		ctx := newCallCtx(context.Background())
		s.add(ctx)
		ctxs = append(ctxs, ctx)
	}
	done := make(chan []context.Context)
	go func() {
		var racing []context.Context
		for range 200 {
			ctx := newCallCtx(context.Background())
			s.add(ctx)
			racing = append(racing, ctx)
		}
		done <- racing
	}()
	s.stop(cause)
	ctxs = append(ctxs, <-done...)
	for i, ctx := range ctxs {
		if causeOf(ctx) != cause {
			t.Fatalf("request %d ended with %v, want the stop's cause", i, causeOf(ctx))
		}
	}
}
