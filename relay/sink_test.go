package relay

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"modelrelay/relay/cache"
	"modelrelay/relay/endpoint"
	"modelrelay/relay/usage"
)

// recorder is a Sink that writes down what reaches it, one line per call.
type recorder struct {
	got    []string
	header http.Header // the last head's
	body   []byte      // every chunk, joined
	fail   error       // returned by every call when set
}

func (r *recorder) Head(status int, h http.Header, length int64) (Sink, error) {
	r.header = h
	r.got = append(r.got, fmt.Sprintf("head %d %d", status, length))
	return r, r.fail
}

func (r *recorder) Chunk(b []byte, flush bool) error {
	r.body = append(r.body, b...)
	if len(b) > 40 {
		r.got = append(r.got, fmt.Sprintf("chunk len=%d %v", len(b), flush))
	} else {
		r.got = append(r.got, fmt.Sprintf("chunk %q %v", b, flush))
	}
	return r.fail
}

func (r *recorder) End() error {
	r.got = append(r.got, "end")
	return r.fail
}

// answerOf is a target's answer: a head, the chunks (flushed when stream), then End.
type answerOf struct {
	status int
	header http.Header
	length int64
	chunks []string
	stream bool
}

// into gives the answer to s as a target does and returns the first error s returned.
func (a answerOf) into(s Sink) error {
	body, err := s.Head(a.status, a.header, a.length)
	if err != nil {
		return err
	}
	for _, c := range a.chunks {
		if err := body.Chunk([]byte(c), a.stream); err != nil {
			return err
		}
	}
	return s.End()
}

var (
	jsonHead = http.Header{"Content-Type": {"application/json"}}
	sseHead  = http.Header{"Content-Type": {"text/event-stream"}}
)

// chainOf names the sinks of a chain, target end first.
func chainOf(s Sink) []string {
	var names []string
	for {
		switch v := s.(type) {
		case *holdSink:
			names, s = append(names, "hold"), v.next
		case *learnSink:
			names, s = append(names, "learn"), v.next
		case *commitSink:
			names, s = append(names, "commit"), v.next
		case *tapSink:
			names, s = append(names, "tap"), v.next
		case *translateSink:
			names, s = append(names, "translate"), v.next
		case *metaSink:
			names, s = append(names, "meta"), v.next
		case *cacheSink:
			names, s = append(names, "cache"), v.next
		case *clientWriter:
			return append(names, "client")
		default:
			return append(names, fmt.Sprintf("%T", s))
		}
	}
}

func TestCompose(t *testing.T) {
	conv := &conversion{route: endpoint.RouteMessages, client: Anthropic, target: OpenAI}
	for _, tc := range []struct {
		name       string
		meta, tap  bool
		caching    bool
		plan       attemptPlan
		want       []string
		translated bool // the client writer ends a cut stream in the translation's events
	}{
		{name: "pass-through", want: []string{"commit", "client"}},
		{name: "inference", tap: true, plan: attemptPlan{keepFailures: true},
			want: []string{"hold", "commit", "tap", "client"}},
		{name: "count_tokens", plan: attemptPlan{keepFailures: true},
			want: []string{"hold", "commit", "client"}},
		{name: "probe", tap: true, plan: attemptPlan{probing: true, learn: newSpeech(nil), keepFailures: true},
			want: []string{"hold", "learn", "commit", "tap", "client"}},
		{name: "translated with x_pool_options", meta: true, tap: true, plan: attemptPlan{conv: conv, keepFailures: true},
			want: []string{"hold", "commit", "tap", "translate", "meta", "client"}, translated: true},
		{name: "a held answer written", meta: true, tap: true, plan: attemptPlan{conv: conv},
			want: []string{"commit", "tap", "translate", "meta", "client"}, translated: true},
		{name: "recorded for the cache", meta: true, tap: true, caching: true, plan: attemptPlan{conv: conv, keepFailures: true},
			want: []string{"hold", "commit", "tap", "translate", "meta", "cache", "client"}, translated: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newAnswer(httptest.NewRecorder(), OpenAI, 0, time.Now())
			if tc.meta {
				a.addMeta()
			}
			if tc.tap {
				a.tapUsage(new(usage.Tap), false)
			}
			if tc.caching {
				a.record(context.Background(), newResponseCache(CacheOptions{Store: cache.NewMemory(1 << 20)}), cache.Key{})
			}
			a.compose(attemptPlan{conv: conv}) // an earlier attempt's chain leaves nothing behind
			if got := chainOf(a.compose(tc.plan)); !slices.Equal(got, tc.want) {
				t.Errorf("chain %v, want %v", got, tc.want)
			}
			if got := a.client.ender != nil; got != tc.translated {
				t.Errorf("client ends streams in the translation's events: %v, want %v", got, tc.translated)
			}
		})
	}
}

// TestComposeAllocatesNothing: the sinks live in the answer, so a chain costs no allocation.
func TestComposeAllocatesNothing(t *testing.T) {
	a := newAnswer(httptest.NewRecorder(), OpenAI, 0, time.Now())
	a.addMeta()
	a.tapUsage(new(usage.Tap), true)
	conv := &conversion{route: endpoint.RouteMessages, client: Anthropic, target: OpenAI}
	for _, plan := range []attemptPlan{{keepFailures: true}, {probing: true, learn: newSpeech(nil)}, {conv: conv}} {
		if n := testing.AllocsPerRun(100, func() { a.compose(plan) }); n != 0 {
			t.Errorf("compose(%+v) allocates %v times", plan, n)
		}
	}
}

// TestSettle: what an attempt leaves the chain code.
func TestSettle(t *testing.T) {
	failure := answerOf{status: 503, header: jsonHead, length: 2, chunks: []string{"{}"}}
	for _, tc := range []struct {
		name     string
		answer   *answerOf
		err      error
		wantErr  error
		kept     int  // status of the request's kept answer afterwards (0: none)
		answered bool // the client got the answer
	}{
		{name: "answered", answer: &answerOf{status: 200, header: jsonHead, length: 2, chunks: []string{"{}"}}, answered: true},
		{name: "a held failure is kept", answer: &failure, wantErr: errHeld, kept: 503},
		{name: "a target that broke off keeps nothing", answer: &failure, err: errUpstream("closed"), wantErr: errUpstream("closed")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			a := newAnswer(w, OpenAI, 0, time.Now())
			a.where.target = "t1"
			out := a.compose(attemptPlan{keepFailures: true})
			body, _ := out.Head(tc.answer.status, tc.answer.header, tc.answer.length)
			for _, c := range tc.answer.chunks {
				body.Chunk([]byte(c), false)
			}
			err := a.settle(out, nil, tc.err)
			if fmt.Sprint(err) != fmt.Sprint(tc.wantErr) {
				t.Fatalf("settle: %v, want %v", err, tc.wantErr)
			}
			switch {
			case tc.kept == 0 && a.kept != nil:
				t.Fatalf("kept %+v", a.kept)
			case tc.kept != 0 && (a.kept == nil || a.kept.status != tc.kept || a.kept.where.target != "t1"):
				t.Fatalf("kept %+v, want %d from t1", a.kept, tc.kept)
			}
			if a.client.wrote != tc.answered {
				t.Fatalf("client answered: %v, want %v", a.client.wrote, tc.answered)
			}
		})
	}
}

// TestReplay: a kept failure is written as the target sent it, named after what answered it.
func TestReplay(t *testing.T) {
	w := httptest.NewRecorder()
	a := newAnswer(w, OpenAI, 0, time.Now())
	a.tapUsage(new(usage.Tap), false)
	k := &heldAnswer{status: 429, header: http.Header{"Content-Type": {"application/json"}, "Retry-After": {"3"}},
		length: -1, body: []byte(`{"error":"busy"}`), where: servedBy{served: "m", target: "t2"}}
	a.where = k.where
	if err := a.replay(k); err != nil {
		t.Fatal(err)
	}
	if w.Code != 429 || w.Body.String() != `{"error":"busy"}` || w.Header().Get("Retry-After") != "3" ||
		w.Header().Get("Content-Length") != "16" || w.Header().Get("X-Modelrelay-Target") != "t2" {
		t.Fatalf("replayed %d %v %q", w.Code, w.Header(), w.Body)
	}
	if !a.started() {
		t.Fatal("a replayed answer is the answer")
	}
}

// TestBodyPath: a chunk passes only the sinks that work on the body.
func TestBodyPath(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tap    bool
		plan   attemptPlan
		status int
		header http.Header
		want   string
	}{
		{"a success is read by the tap", true, attemptPlan{keepFailures: true}, 200, jsonHead, "tap"},
		{"a failure held", true, attemptPlan{keepFailures: true}, 503, jsonHead, "hold"},
		{"a refusal held", true, attemptPlan{probing: true, learn: newSpeech(nil)}, 404, jsonHead, "hold"},
		{"a client error goes straight to the client", true, attemptPlan{keepFailures: true}, 400, jsonHead, "client"},
		{"nothing to read", false, attemptPlan{keepFailures: true}, 200, jsonHead, "client"},
		{"a translated stream", false, attemptPlan{conv: toAnthropic(true)}, 200, sseHead, "translate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newAnswer(httptest.NewRecorder(), Anthropic, 0, time.Now())
			if tc.tap {
				a.tapUsage(new(usage.Tap), false)
			}
			body, err := a.compose(tc.plan).Head(tc.status, tc.header, -1)
			if err != nil {
				t.Fatal(err)
			}
			if got := chainOf(body)[0]; got != tc.want {
				t.Fatalf("the body goes to %s, want %s", got, tc.want)
			}
		})
	}
}
