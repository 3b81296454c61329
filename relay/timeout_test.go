package relay

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"
)

// A request's timeout cancels that request only: a timer stopped and reused for the next
// request never reaches the one before.
func TestRequestTimeoutReused(t *testing.T) {
	first := newCallCtx(context.Background())
	rt := startTimeout(time.Hour, newAnswer(httptest.NewRecorder(), OpenAI, 0, time.Now()), first)
	rt.stop()

	second := newCallCtx(context.Background())
	rt = startTimeout(time.Millisecond, newAnswer(httptest.NewRecorder(), OpenAI, 0, time.Now()), second)
	<-second.Done()
	if causeOf(second) != errRequestTimeout {
		t.Fatalf("the second request ended with %v, want the request timeout", causeOf(second))
	}
	rt.stop() // fired: not reused
	if first.Err() != nil {
		t.Fatalf("the first request, whose timeout was stopped, ended: %v", causeOf(first))
	}
}
