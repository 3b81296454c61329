package relay_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"modelrelay/protocol"
	"modelrelay/relay"
)

// receiver waits for a request on any of ws and returns the index of the worker that got it.
func receiver(t *testing.T, ws []*liveWorker) (int, protocol.Request) {
	t.Helper()
	deadline := time.After(waitLimit)
	for {
		for i, w := range ws {
			select {
			case m := <-w.frames:
				req, ok := m.(protocol.Request)
				if !ok {
					t.Fatalf("worker %d got %#v, want a request", i+1, m)
				}
				return i, req
			default:
			}
		}
		select {
		case <-deadline:
			t.Fatal("no worker received the request")
		case <-time.After(2 * time.Millisecond):
		}
	}
}

func TestRoundRobinAmongTiedWorkers(t *testing.T) {
	_, ts := startServer(t, relay.Options{Timings: quietTimings()})
	ws := []*liveWorker{
		join(t, ts, regLoad("w1", []string{"m"}, 3, 0)),
		join(t, ts, regLoad("w2", []string{"m"}, 3, 0)),
		join(t, ts, regLoad("w3", []string{"m"}, 3, 1)),
	}
	var got []int
	for i := 0; i < 4; i++ {
		goPost(ts, "/v1/chat/completions", chatBody("m", false))
		n, _ := receiver(t, ws)
		got = append(got, n+1)
	}
	if want := []int{1, 2, 3, 1}; !equalInts(got, want) {
		t.Fatalf("requests 1-4 went to workers %v, want %v", got, want)
	}
}

func TestLowestLoadWins(t *testing.T) {
	_, ts := startServer(t, relay.Options{Timings: quietTimings(), AdminToken: "tok"})
	ws := []*liveWorker{
		join(t, ts, regLoad("busy", []string{"m"}, 4, 2)),
		join(t, ts, regLoad("idle", []string{"m"}, 4, 0)),
	}
	goPost(ts, "/v1/chat/completions", chatBody("m", false))
	if n, _ := receiver(t, ws); n != 1 {
		t.Fatalf("request went to worker %d (load 2), want the idle one", n+1)
	}
	// A pong overwrites the reported load: now worker 2 claims to be the busiest.
	ws[1].send(protocol.Pong{CurrentLoad: 3})
	eventually(t, "pong applied", func() bool {
		v := adminWorkerLoad(t, ts, ws[1].ack.WorkerID)
		return v == 3
	})
	goPost(ts, "/v1/chat/completions", chatBody("m", false))
	if n, _ := receiver(t, ws); n != 0 {
		t.Fatalf("request went to worker %d after its pong reported load 3, want worker 1 (load 2)", n+1)
	}
}

func TestStarWorkerServesAnyModelAndIsNotListed(t *testing.T) {
	_, ts := startServer(t, relay.Options{Timings: quietTimings()})
	w := join(t, ts, reg("any", []string{"*"}, 1))
	c := goPost(ts, "/v1/chat/completions", chatBody("whatever-7b", false))
	req := w.request()
	if req.Model != "whatever-7b" {
		t.Fatalf("model %q", req.Model)
	}
	w.complete(req.RequestID, 200, nil, "ok")
	wait(t, c)
	if ids := modelIDs(t, ts); len(ids) != 0 {
		t.Fatalf("/v1/models lists %q for a * worker", ids)
	}
}

func TestModelsListOrderDedupAndShape(t *testing.T) {
	_, ts := startServer(t, relay.Options{Timings: quietTimings()})
	join(t, ts, reg("w1", []string{"b", "a"}, 1))
	join(t, ts, reg("w2", []string{"a", "*", "c"}, 1))
	join(t, ts, reg("w3", []string{"c", "d", "b"}, 1))
	r := wait(t, goCall(context.Background(), http.MethodGet, ts.URL+"/v1/models", "", nil))
	var list struct {
		Object string `json:"object"`
		Data   []struct {
			ID      string `json:"id"`
			Object  string `json:"object"`
			OwnedBy string `json:"owned_by"`
		} `json:"data"`
	}
	if err := json.Unmarshal(r.body, &list); err != nil {
		t.Fatalf("%s: %v", r.body, err)
	}
	if list.Object != "list" {
		t.Fatalf("object %q", list.Object)
	}
	var ids []string
	for _, d := range list.Data {
		ids = append(ids, d.ID)
		if d.Object != "model" || d.OwnedBy != "worker-proxy" {
			t.Fatalf("entry %+v", d)
		}
	}
	if want := []string{"b", "a", "c", "d"}; !equalStrings(ids, want) {
		t.Fatalf("models %q, want %q", ids, want)
	}
}

func TestModelStaysKnownAfterLastWorkerLeaves(t *testing.T) {
	_, ts := startServer(t, relay.Options{Timings: quietTimings()})
	w := join(t, ts, reg("w", []string{"m"}, 1))
	w.vanish()
	eventually(t, "worker gone", func() bool { return !healthHasWorker(t, ts, w.ack.WorkerID) })
	c := waitInQueue(t, ts, 1, goPost(ts, "/v1/chat/completions", chatBody("m", false))) // queued, not 404
	w2 := join(t, ts, reg("back", []string{"m"}, 1))
	req := w2.request()
	w2.complete(req.RequestID, 200, nil, "ok")
	if r := wait(t, c); r.resp.StatusCode != 200 {
		t.Fatalf("status %d %s", r.resp.StatusCode, r.body)
	}
}

func TestModelForgottenAfterKeepKnown(t *testing.T) {
	tm := quietTimings()
	tm.KeepKnown = 200 * time.Millisecond
	_, ts := startServer(t, relay.Options{Timings: tm, QueueTimeout: 50 * time.Millisecond})
	w := join(t, ts, reg("w", []string{"m"}, 1))
	w.vanish()
	eventually(t, "model forgotten (404)", func() bool {
		r := wait(t, goPost(ts, "/v1/chat/completions", chatBody("m", false)))
		return r.resp.StatusCode == 404
	})
}

func TestStarWorkerLeavingKeepsEveryModelKnown(t *testing.T) {
	_, ts := startServer(t, relay.Options{Timings: quietTimings()})
	w := join(t, ts, reg("any", []string{"*"}, 1))
	w.vanish()
	eventually(t, "worker gone", func() bool { return !healthHasWorker(t, ts, w.ack.WorkerID) })
	c := waitInQueue(t, ts, 1, goPost(ts, "/v1/chat/completions", chatBody("never-seen", false)))
	w2 := join(t, ts, reg("any2", []string{"*"}, 1))
	req := w2.request()
	w2.complete(req.RequestID, 200, nil, "ok")
	wait(t, c)
}

func TestStreamCeiling(t *testing.T) {
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			_, ts := startServer(t, relay.Options{Timings: quietTimings(), MaxStreamBytes: 32})
			w := join(t, ts, reg("w", []string{"m"}, 1))
			sc := goStream(context.Background(), ts, rt.path, chatBody("m", true))
			req := w.request()
			w.chunk(req.RequestID, "data: 0123456789\n\n") // 18 bytes: under the ceiling
			r := wait(t, sc)
			defer r.resp.Body.Close()
			first := readN(t, r.resp.Body, 18)
			if first != "data: 0123456789\n\n" {
				t.Fatalf("first chunk %q", first)
			}
			w.chunk(req.RequestID, "data: this one passes the limit\n\n")
			rest := readAll(t, r.resp.Body)
			checkStreamError(t, rt, rest, "stream exceeded size limit")
			if strings.Contains(rest, "passes the limit") {
				t.Fatalf("the offending chunk reached the client: %q", rest)
			}
			c := w.cancel()
			if c.RequestID != req.RequestID {
				t.Fatalf("cancel %#v", c)
			}
		})
	}
}

func TestQueuedWorkDispatchedOnRegister(t *testing.T) {
	// Pings never fire here: only the registration itself can hand the queued request over.
	_, ts := startServer(t, relay.Options{Timings: quietTimings()})
	w1, held, first := hold(t, ts, "/v1/chat/completions", "m")
	c := goPost(ts, "/v1/chat/completions", markedBody("m", false, "waiting"))
	waitQueueDepth(t, ts, 1)
	w2 := joinNoWait(t, ts, reg("fresh", []string{"m"}, 1))
	req := w2.request()
	if !strings.Contains(req.Body, "waiting") {
		t.Fatalf("new worker got %q", req.Body)
	}
	w2.complete(req.RequestID, 200, nil, "ok")
	wait(t, c)
	w1.complete(held.RequestID, 200, nil, "ok")
	wait(t, first)
}

func TestQueuedWorkDispatchedOnModelsUpdate(t *testing.T) {
	_, ts := startServer(t, relay.Options{Timings: quietTimings()})
	w1, held, first := hold(t, ts, "/v1/chat/completions", "m")
	w2 := join(t, ts, reg("other", []string{"x"}, 1))
	c := goPost(ts, "/v1/chat/completions", markedBody("m", false, "waiting"))
	waitQueueDepth(t, ts, 1)
	w2.send(protocol.ModelsUpdate{Models: []string{"x", "m"}, CurrentLoad: 0})
	req := w2.request()
	if !strings.Contains(req.Body, "waiting") {
		t.Fatalf("got %q", req.Body)
	}
	w2.complete(req.RequestID, 200, nil, "ok")
	wait(t, c)
	w1.complete(held.RequestID, 200, nil, "ok")
	wait(t, first)
}

func TestQueuedWorkDispatchedOnPongMakingRoom(t *testing.T) {
	_, ts := startServer(t, relay.Options{Timings: quietTimings()})
	w := join(t, ts, regLoad("full", []string{"m"}, 2, 2))
	c := goPost(ts, "/v1/chat/completions", markedBody("m", false, "waiting"))
	waitQueueDepth(t, ts, 1)
	w.send(protocol.Pong{CurrentLoad: 1})
	req := w.request()
	w.complete(req.RequestID, 200, nil, "ok")
	wait(t, c)
}

func TestQueuedWorkDispatchedWhenAnotherWorkerDisconnects(t *testing.T) {
	// A request requeued by a lost worker must go to an idle worker at once.
	_, ts := startServer(t, relay.Options{Timings: quietTimings()})
	w1 := join(t, ts, reg("doomed", []string{"m"}, 1))
	c := goPost(ts, "/v1/chat/completions", markedBody("m", false, "moved"))
	req := w1.request()
	w2 := join(t, ts, reg("idle", []string{"m"}, 1))
	w1.vanish()
	got := w2.request()
	if got.RequestID != req.RequestID {
		t.Fatalf("idle worker got %s, want the requeued %s", got.RequestID, req.RequestID)
	}
	w2.complete(got.RequestID, 200, nil, "ok")
	wait(t, c)
}

func TestLostBeforeFirstByteRequeuedToFront(t *testing.T) {
	_, ts := startServer(t, relay.Options{Timings: quietTimings()})
	w1 := join(t, ts, reg("doomed", []string{"m"}, 1))
	a := goPost(ts, "/v1/chat/completions", markedBody("m", false, "A"))
	reqA := w1.request()
	b := goPost(ts, "/v1/chat/completions", markedBody("m", false, "B"))
	waitQueueDepth(t, ts, 1)
	w1.vanish()
	waitQueueDepth(t, ts, 2)
	w2 := join(t, ts, reg("next", []string{"m"}, 1))
	first := w2.request()
	if first.RequestID != reqA.RequestID || !strings.Contains(first.Body, `"A"`) {
		t.Fatalf("requeued request did not go first: got %s %q", first.RequestID, first.Body)
	}
	if first.Body != reqA.Body {
		t.Fatalf("requeued body changed")
	}
	w2.complete(first.RequestID, 200, nil, "a")
	second := w2.request()
	w2.complete(second.RequestID, 200, nil, "b")
	if r := wait(t, a); string(r.body) != "a" {
		t.Fatalf("A got %q", r.body)
	}
	if r := wait(t, b); string(r.body) != "b" {
		t.Fatalf("B got %q", r.body)
	}
}

func TestRequeueKeepsArrivalTime(t *testing.T) {
	// The queue timeout counts from first arrival: a request that already waited past it while
	// running on a worker that then died must not get a fresh queue allowance.
	_, ts := startServer(t, relay.Options{Timings: quietTimings(), QueueTimeout: 400 * time.Millisecond})
	w1 := join(t, ts, reg("doomed", []string{"m"}, 1))
	c := goPost(ts, "/v1/chat/completions", chatBody("m", false))
	w1.request()
	time.Sleep(600 * time.Millisecond) // past the queue timeout, counted from arrival
	lost := time.Now()
	w1.vanish()
	r := wait(t, c)
	checkError(t, routes[0], r, 504, "queue timeout: no worker available within deadline")
	if waited := time.Since(lost); waited > 300*time.Millisecond {
		t.Fatalf("requeued request waited %v more: its queue clock was reset", waited)
	}
}

func TestClientDisconnectWhileQueuedRemovesRequest(t *testing.T) {
	_, ts := startServer(t, relay.Options{Timings: quietTimings()})
	w, held, first := hold(t, ts, "/v1/chat/completions", "m")
	ctx, cancel := context.WithCancel(context.Background())
	gone := goCall(ctx, http.MethodPost, ts.URL+"/v1/chat/completions", markedBody("m", false, "gone"), nil)
	waitQueueDepth(t, ts, 1)
	cancel()
	<-gone
	waitQueueDepth(t, ts, 0)
	w.complete(held.RequestID, 200, nil, "ok")
	wait(t, first)
	c := goPost(ts, "/v1/chat/completions", markedBody("m", false, "after"))
	req := w.request()
	if !strings.Contains(req.Body, "after") {
		t.Fatalf("worker got %q: the abandoned request was dispatched", req.Body)
	}
	w.complete(req.RequestID, 200, nil, "ok")
	wait(t, c)
}

func TestClientDisconnectSendsExactlyOneCancel(t *testing.T) {
	for _, stream := range []bool{false, true} {
		name := "non-streaming"
		if stream {
			name = "streaming"
		}
		t.Run(name, func(t *testing.T) {
			_, ts := startServer(t, relay.Options{Timings: quietTimings()})
			w := join(t, ts, reg("w", []string{"m"}, 2))
			ctx, cancel := context.WithCancel(context.Background())
			c := goStream(ctx, ts, "/v1/chat/completions", chatBody("m", stream))
			req := w.request()
			if stream {
				w.chunk(req.RequestID, "data: 1\n\n")
				r := wait(t, c)
				readN(t, r.resp.Body, len("data: 1\n\n"))
			}
			cancel()
			cn := w.cancel()
			if cn.RequestID != req.RequestID || cn.Reason != protocol.CancelClientDisconnect {
				t.Fatalf("cancel %#v", cn)
			}
			// The worker keeps talking about it; nothing more may come for that id.
			w.chunk(req.RequestID, "data: late\n\n")
			w.complete(req.RequestID, 499, nil, "")
			// A later request is the next frame: no second cancel came in between.
			c2 := goPost(ts, "/v1/chat/completions", markedBody("m", false, "next"))
			if m := w.next(); !isRequestWith(m, "next") {
				t.Fatalf("after the cancel the worker got %#v, want only the next request", m)
			} else {
				w.complete(m.(protocol.Request).RequestID, 200, nil, "ok")
			}
			wait(t, c2)
		})
	}
}

func TestLateChunkAfterCancelKeepsSession(t *testing.T) {
	_, ts := startServer(t, relay.Options{Timings: quietTimings(), RequestTimeout: 200 * time.Millisecond})
	w := join(t, ts, reg("w", []string{"m"}, 1))
	c := goPost(ts, "/v1/chat/completions", chatBody("m", true))
	req := w.request()
	wait(t, c) // 504
	w.cancel()
	w.chunk(req.RequestID, "data: too late\n\n")
	w.complete(req.RequestID, 200, nil, "")
	w.chunk(req.RequestID, "data: later still\n\n")
	c2 := goPost(ts, "/v1/chat/completions", markedBody("m", false, "next"))
	req2 := w.request()
	w.complete(req2.RequestID, 200, nil, "served")
	if r := wait(t, c2); r.resp.StatusCode != 200 || string(r.body) != "served" {
		t.Fatalf("next request: %d %q", r.resp.StatusCode, r.body)
	}
}

func TestUnknownRequestIDsAreDropped(t *testing.T) {
	_, ts := startServer(t, relay.Options{Timings: quietTimings()})
	w := join(t, ts, reg("w", []string{"m"}, 1))
	c := goPost(ts, "/v1/chat/completions", chatBody("m", false))
	req := w.request()
	ghost := "req-does-not-exist"
	w.chunk(ghost, "data: x\n\n")
	w.complete(ghost, 200, nil, "x")
	w.send(protocol.Error{RequestID: &ghost, Code: "x", Message: "x"})
	w.complete(req.RequestID, 200, nil, "real")
	if r := wait(t, c); string(r.body) != "real" {
		t.Fatalf("got %q", r.body)
	}
	c2 := goPost(ts, "/v1/chat/completions", chatBody("m", false))
	req2 := w.request()
	w.complete(req2.RequestID, 200, nil, "again")
	wait(t, c2)
}

func TestErrorFrameWithoutRequestIDIsOnlyLogged(t *testing.T) {
	_, ts := startServer(t, relay.Options{Timings: quietTimings()})
	w := join(t, ts, reg("w", []string{"m"}, 1))
	c := goPost(ts, "/v1/chat/completions", chatBody("m", false))
	req := w.request()
	w.send(protocol.Error{Code: "backend_slow", Message: "backend is slow"})
	w.complete(req.RequestID, 200, nil, "fine")
	if r := wait(t, c); r.resp.StatusCode != 200 || string(r.body) != "fine" {
		t.Fatalf("got %d %q", r.resp.StatusCode, r.body)
	}
	if !healthHasWorker(t, ts, w.ack.WorkerID) {
		t.Fatal("worker dropped after an error frame without request_id")
	}
}

func TestUnconfirmedCancelFreesSlotAfterGrace(t *testing.T) {
	tm := quietTimings()
	tm.CancelGrace = 300 * time.Millisecond
	_, ts := startServer(t, relay.Options{Timings: tm})
	w := join(t, ts, reg("w", []string{"m"}, 1))
	ctx, cancel := context.WithCancel(context.Background())
	gone := goCall(ctx, http.MethodPost, ts.URL+"/v1/chat/completions", markedBody("m", false, "gone"), nil)
	w.request()
	c := goPost(ts, "/v1/chat/completions", markedBody("m", false, "waiting"))
	waitQueueDepth(t, ts, 1)
	cancel()
	<-gone
	w.cancel() // and never confirmed
	req := w.request()
	if !strings.Contains(req.Body, "waiting") {
		t.Fatalf("got %q", req.Body)
	}
	w.complete(req.RequestID, 200, nil, "ok")
	wait(t, c)
}

func TestLostMidStreamEndsWithErrorEvent(t *testing.T) {
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			_, ts := startServer(t, relay.Options{Timings: quietTimings()})
			w := join(t, ts, reg("w", []string{"m"}, 1))
			sc := goStream(context.Background(), ts, rt.path, markedBody("m", true, "story"))
			req := w.request()
			w.chunk(req.RequestID, "data: once upon\n\n")
			r := wait(t, sc)
			defer r.resp.Body.Close()
			readN(t, r.resp.Body, len("data: once upon\n\n"))
			w.vanish()
			rest := readAll(t, r.resp.Body)
			checkStreamError(t, rt, rest, "")
			if !rt.anthropic && (!strings.Contains(rest, `"code":"worker_lost"`) || !strings.Contains(rest, `"type":"upstream_error"`)) {
				t.Fatalf("openai mid-stream error %q, want type upstream_error code worker_lost", rest)
			}
			// Not re-run: a worker joining now gets nothing until a new request arrives.
			w2 := join(t, ts, reg("w2", []string{"m"}, 1))
			c := goPost(ts, rt.path, markedBody("m", false, "fresh"))
			if m := w2.next(); !isRequestWith(m, "fresh") {
				t.Fatalf("the lost stream was re-run: %#v", m)
			} else {
				w2.complete(m.(protocol.Request).RequestID, 200, nil, "ok")
			}
			wait(t, c)
		})
	}
}

func isRequestWith(m protocol.Message, marker string) bool {
	r, ok := m.(protocol.Request)
	return ok && strings.Contains(r.Body, marker)
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestFreedWorkerTakesOldestRequestItCanServe(t *testing.T) {
	_, ts := startServer(t, relay.Options{Timings: quietTimings()})
	wx, heldX, firstX := hold(t, ts, "/v1/chat/completions", "x")
	wm := join(t, ts, reg("m-only", []string{"m"}, 1))
	heldM := goPost(ts, "/v1/chat/completions", markedBody("m", false, "m-held"))
	reqM := wm.request()
	cx := goPost(ts, "/v1/chat/completions", markedBody("x", false, "x-waiting"))
	waitQueueDepth(t, ts, 1)
	c1 := goPost(ts, "/v1/chat/completions", markedBody("m", false, "m-first"))
	waitQueueDepth(t, ts, 2)
	c2 := goPost(ts, "/v1/chat/completions", markedBody("m", false, "m-second"))
	waitQueueDepth(t, ts, 3)
	// The m worker frees up: it skips the x request it cannot serve and takes the oldest m one.
	wm.complete(reqM.RequestID, 200, nil, "ok")
	wait(t, heldM)
	r := wm.request()
	if !strings.Contains(r.Body, "m-first") {
		t.Fatalf("freed worker took %q, want the oldest m request", r.Body)
	}
	wm.complete(r.RequestID, 200, nil, "ok")
	r = wm.request()
	if !strings.Contains(r.Body, "m-second") {
		t.Fatalf("got %q", r.Body)
	}
	wm.complete(r.RequestID, 200, nil, "ok")
	wx.complete(heldX.RequestID, 200, nil, "ok")
	r = wx.request()
	if !strings.Contains(r.Body, "x-waiting") {
		t.Fatalf("got %q", r.Body)
	}
	wx.complete(r.RequestID, 200, nil, "ok")
	for _, c := range []<-chan result{firstX, cx, c1, c2} {
		wait(t, c)
	}
}

func TestStreamingRequestLostBeforeFirstChunkIsRequeued(t *testing.T) {
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			_, ts := startServer(t, relay.Options{Timings: quietTimings()})
			w1 := join(t, ts, reg("doomed", []string{"m"}, 1))
			sc := goStream(context.Background(), ts, rt.path, markedBody("m", true, "again"))
			req := w1.request()
			w1.vanish()
			w2 := join(t, ts, reg("next", []string{"m"}, 1))
			got := w2.request()
			if got.RequestID != req.RequestID || !got.IsStreaming {
				t.Fatalf("got %#v, want the requeued streaming request %s", got, req.RequestID)
			}
			w2.chunk(got.RequestID, "data: whole\n\n")
			w2.send(protocol.ResponseComplete{RequestID: got.RequestID, StatusCode: 200})
			r := wait(t, sc)
			defer r.resp.Body.Close()
			if rest := readAll(t, r.resp.Body); rest != "data: whole\n\n" {
				t.Fatalf("stream %q", rest)
			}
		})
	}
}
