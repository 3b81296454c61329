package h1

import (
	"context"
	"io"
	"sync"
	"testing"
)

// testWatcher is a Watcher as a caller would write one: a context it ends itself, running the
// abort registered at that moment.
type testWatcher struct {
	context.Context
	cancel context.CancelFunc

	mu                 sync.Mutex
	abort              func()
	ran                bool
	watches, unwatches int
}

func newTestWatcher() *testWatcher {
	ctx, cancel := context.WithCancel(context.Background())
	return &testWatcher{Context: ctx, cancel: cancel}
}

func (w *testWatcher) Watch(abort func()) uint64 {
	w.mu.Lock()
	w.watches++
	w.abort, w.ran = abort, w.Err() != nil
	ran := w.ran
	w.mu.Unlock()
	if ran {
		abort()
	}
	return 1 // one call at a time in these tests
}

func (w *testWatcher) Unwatch(uint64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.unwatches++
	ran := w.ran
	w.abort, w.ran = nil, false
	return !ran
}

func (w *testWatcher) end() {
	w.cancel()
	w.mu.Lock()
	abort := w.abort
	w.ran = abort != nil
	w.mu.Unlock()
	if abort != nil {
		abort()
	}
}

func (w *testWatcher) counts() (watches, unwatches int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.watches, w.unwatches
}

// A Watcher context takes the abort in place of context.AfterFunc: one Watch and one Unwatch
// per call, and a connection whose abort did not run goes back to the pool.
func TestWatcherKeepsTheConnection(t *testing.T) {
	s := startServer(t, fixed("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"))
	var c Client
	defer c.CloseIdle()
	w := newTestWatcher()
	defer w.cancel()
	for range 2 {
		resp, err := c.Do(w, get(s))
		if err != nil {
			t.Fatal(err)
		}
		if body, err := io.ReadAll(resp.Body); err != nil || string(body) != "hello" {
			t.Fatalf("body %q, %v", body, err)
		}
		resp.Body.Close()
	}
	if watches, unwatches := w.counts(); watches != 2 || unwatches != 2 {
		t.Fatalf("%d watches, %d unwatches: want one of each per call", watches, unwatches)
	}
	if s.accepted.Load() != 1 {
		t.Fatalf("%d connections, want 1: the second call reuses the first's", s.accepted.Load())
	}
}

// Ending a Watcher context ends a call awaiting its head, as ending any context does, and the
// connection is not reused.
func TestWatcherEndsTheCall(t *testing.T) {
	got := make(chan struct{}, 1)
	s := startServer(t, answerNever(got))
	var c Client
	defer c.CloseIdle()
	w := newTestWatcher()
	done := make(chan struct{})
	var err error
	go func() {
		defer close(done)
		_, err = c.Do(w, post(s, "in memory"))
	}()
	<-got
	w.end()
	within(t, done, "Do awaiting the head after the Watcher ended")
	if !isCanceled(err) {
		t.Fatalf("%v: want context.Canceled", err)
	}
	if n := idleConns(&c); n != 0 {
		t.Fatalf("%d idle connections: an aborted one was pooled", n)
	}
}
