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
	first, cancelFirst := context.WithCancelCause(context.Background())
	defer cancelFirst(nil)
	rt := startTimeout(time.Hour, newAnswer(httptest.NewRecorder(), OpenAI, 0, time.Now()), cancelFirst)
	rt.stop()

	second, cancelSecond := context.WithCancelCause(context.Background())
	defer cancelSecond(nil)
	rt = startTimeout(time.Millisecond, newAnswer(httptest.NewRecorder(), OpenAI, 0, time.Now()), cancelSecond)
	<-second.Done()
	if context.Cause(second) != errRequestTimeout {
		t.Fatalf("the second request ended with %v, want the request timeout", context.Cause(second))
	}
	rt.stop() // fired: not reused
	if first.Err() != nil {
		t.Fatalf("the first request, whose timeout was stopped, ended: %v", context.Cause(first))
	}
}
