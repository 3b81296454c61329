package relay_test

// Scheduling from outside: priority classes with aging and shedding, prefer_gpu, session
// affinity with bounded load, cache-aware prefix placement, and what a pool-aware client sees
// (x-modelrelay-target, x-modelrelay-queue-ms, x_pool_meta). The relay runs on loopback in
// front of static backends that record what reached them; a request whose prompt carries
// holdMark stays in flight on its backend until the test releases it, which is how a test
// raises a target's load or keeps a slot busy without timing.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"modelrelay/protocol"
	"modelrelay/relay"
)

// holdMark in a request body keeps the call in flight on its backend until release.
const holdMark = "[hold]"

// reply is every backend's answer text: the same wherever a turn ran, so a conversation's
// next prompt does not depend on where its last turn went. Longer than a block, so answers
// grow the prompt the way real ones do.
var reply = strings.Repeat("Here is a considered answer to the question. ", 8)

// gpuFleet is a set of static backends serving model "m", each answering under its name.
type gpuFleet struct {
	gpus []*gpu

	mu   sync.Mutex
	gate chan struct{} // held calls wait for it to close
}

type gpu struct {
	*backend
	name string
	held atomic.Int32 // calls waiting on the gate now
}

func newFleet(t *testing.T, names ...string) *gpuFleet {
	t.Helper()
	f := &gpuFleet{gate: make(chan struct{})}
	for _, name := range names {
		g := &gpu{name: name, backend: &backend{}}
		g.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			g.mu.Lock()
			g.seen = append(g.seen, &seenRequest{path: r.URL.RequestURI(), host: r.Host, header: r.Header.Clone(), body: string(body)})
			g.mu.Unlock()
			f.serve(g, w, r, string(body))
		}))
		t.Cleanup(g.Close)
		f.gpus = append(f.gpus, g)
	}
	t.Cleanup(f.release) // before the backends close: their handlers must not stay blocked
	return f
}

// backends are the fleet as relay.Backends (weight 1, no concurrency cap).
func (f *gpuFleet) backends() []relay.Backend {
	var bs []relay.Backend
	for _, g := range f.gpus {
		bs = append(bs, relay.Backend{Name: g.name, URL: g.URL, Models: []string{"m"}})
	}
	return bs
}

func (f *gpuFleet) gpu(name string) *gpu {
	for _, g := range f.gpus {
		if g.name == name {
			return g
		}
	}
	panic("no gpu " + name)
}

// release lets every held call answer; calls that arrive later with holdMark wait again.
func (f *gpuFleet) release() {
	f.mu.Lock()
	close(f.gate)
	f.gate = make(chan struct{})
	f.mu.Unlock()
}

// heldTotal is the number of calls held across the fleet.
func (f *gpuFleet) heldTotal() int {
	n := 0
	for _, g := range f.gpus {
		n += int(g.held.Load())
	}
	return n
}

// serve answers in the dialect of the path, naming the backend in served_by.
func (f *gpuFleet) serve(g *gpu, w http.ResponseWriter, r *http.Request, body string) {
	if strings.Contains(body, holdMark) {
		f.mu.Lock()
		gate := f.gate
		f.mu.Unlock()
		g.held.Add(1)
		select {
		case <-gate:
		case <-r.Context().Done():
		}
		g.held.Add(-1)
	}
	var in struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	json.Unmarshal([]byte(body), &in)
	w.Header().Set("X-Backend", g.name)
	if in.Stream {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: {\"served_by\":%q}\n\ndata: [DONE]\n\n", g.name)
		return
	}
	var answer map[string]any
	if strings.HasPrefix(r.URL.Path, "/v1/messages") {
		answer = map[string]any{"id": "msg_1", "type": "message", "role": "assistant", "model": in.Model, "served_by": g.name,
			"content": []any{map[string]any{"type": "text", "text": reply}}, "stop_reason": "end_turn"}
	} else {
		answer = map[string]any{"id": "chatcmpl-1", "object": "chat.completion", "model": in.Model, "served_by": g.name,
			"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": reply}, "finish_reason": "stop"}}}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(answer)
}

// call posts body to path with header (may be nil) in the background.
func call(ts *httptest.Server, path string, header http.Header, body string) <-chan result {
	return goCall(context.Background(), http.MethodPost, ts.URL+path, body, header)
}

// servedBy checks a relayed 200 and returns the target that served it, as the backend says,
// after checking that x-modelrelay-target says the same and x-modelrelay-queue-ms is a number
// of milliseconds.
func servedBy(t *testing.T, label string, r result) string {
	t.Helper()
	if r.resp.StatusCode != 200 {
		t.Fatalf("%s: status %d, body %s", label, r.resp.StatusCode, r.body)
	}
	var v struct {
		ServedBy string `json:"served_by"`
	}
	if err := json.Unmarshal(r.body, &v); err != nil || v.ServedBy == "" {
		t.Fatalf("%s: answer %s names no backend", label, r.body)
	}
	if got := r.resp.Header.Get("X-Modelrelay-Target"); got != v.ServedBy {
		t.Errorf("%s: x-modelrelay-target %q, but %s served it", label, got, v.ServedBy)
	}
	if ms, err := strconv.Atoi(r.resp.Header.Get("X-Modelrelay-Queue-Ms")); err != nil || ms < 0 {
		t.Errorf("%s: x-modelrelay-queue-ms %q is not a number of milliseconds", label, r.resp.Header.Get("X-Modelrelay-Queue-Ms"))
	}
	return v.ServedBy
}

// ask sends a request and waits for the target that served it.
func ask(t *testing.T, ts *httptest.Server, label, path string, header http.Header, body string) string {
	t.Helper()
	return servedBy(t, label, wait(t, call(ts, path, header, body)))
}

// chatWith is an OpenAI chat body for model m with messages and extra top-level members.
func chatWith(messages []any, extra map[string]any) string {
	m := map[string]any{"model": "m", "messages": messages}
	for k, v := range extra {
		m[k] = v
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func msg(role, content string) map[string]any {
	return map[string]any{"role": role, "content": content}
}

// opts is a body with one user message (marker) and x_pool_options o (none when nil).
func opts(marker string, o map[string]any) string {
	extra := map[string]any{}
	if o != nil {
		extra["x_pool_options"] = o
	}
	return chatWith([]any{msg("user", marker)}, extra)
}

// prose is n bytes of text that differ, from the first byte on, for each seed: a conversation's
// blocks share nothing with another seed's.
func prose(seed string, n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "%s note %d: the %s system keeps its numbers in order (%d). ", seed, i, seed, i*7919%1000)
	}
	return b.String()[:n]
}

// markers are the user messages the backend saw, in arrival order.
func markers(t *testing.T, b *backend) []string {
	t.Helper()
	var out []string
	for _, s := range b.requests() {
		var v struct {
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
		}
		if err := json.Unmarshal([]byte(s.body), &v); err != nil || len(v.Messages) == 0 {
			t.Fatalf("backend got %q", s.body)
		}
		out = append(out, v.Messages[len(v.Messages)-1].Content)
	}
	return out
}

// --- Priority ---------------------------------------------------------------------------

// oneSlot is a relay in front of one backend that takes one request at a time, with that
// slot taken by a held request (answered by the returned channel after f.release).
func oneSlot(t *testing.T, o relay.Options) (*gpuFleet, *httptest.Server, <-chan result) {
	t.Helper()
	f := newFleet(t, "solo")
	o.Backends = f.backends()
	o.Backends[0].MaxConcurrent = 1
	o.Timings = quietTimings()
	_, ts := startServer(t, o)
	first := call(ts, "/v1/chat/completions", nil, opts("first "+holdMark, nil))
	eventually(t, "the first request held on the backend", func() bool { return f.heldTotal() == 1 })
	return f, ts, first
}

func priorityHeader(p string) http.Header { return http.Header{"X-Modelrelay-Priority": {p}} }

func TestPriorityHighBeforeNormalBeforeLow(t *testing.T) {
	f, ts, first := oneSlot(t, relay.Options{Scheduling: relay.Scheduling{CacheAware: true}})
	// Each joins the queue before the next is sent, so queue order is arrival order. The
	// priority comes from the header, from x_pool_options, or from neither (normal);
	// x_pool_options wins over the header.
	waiters := []struct {
		marker string
		header http.Header
		o      map[string]any
	}{
		{"low-1", priorityHeader("low"), nil},
		{"normal-1", nil, nil},
		{"high-1", nil, map[string]any{"priority": "high"}},
		{"normal-2", priorityHeader("low"), map[string]any{"priority": "normal"}},
		{"low-2", nil, map[string]any{"priority": "low"}},
		{"high-2", priorityHeader("high"), nil},
		{"normal-3", priorityHeader("normal"), map[string]any{}},
	}
	var pending []<-chan result
	for i, w := range waiters {
		pending = append(pending, waitInQueue(t, ts, i+1, call(ts, "/v1/chat/completions", w.header, opts(w.marker, w.o))))
	}
	f.release()
	for i, c := range pending {
		servedBy(t, waiters[i].marker, wait(t, c))
	}
	servedBy(t, "first", wait(t, first))
	want := []string{"first " + holdMark, "high-1", "high-2", "normal-1", "normal-2", "normal-3", "low-1", "low-2"}
	if got := markers(t, f.gpu("solo").backend); !equalStrings(got, want) {
		t.Fatalf("the backend was sent %q, want %q", got, want)
	}
}

func TestPriorityAgingLetsAnOldLowWaiterPassNewerNormals(t *testing.T) {
	const aging = 200 * time.Millisecond
	f, ts, first := oneSlot(t, relay.Options{Scheduling: relay.Scheduling{PriorityAging: aging}})
	oldLow := waitInQueue(t, ts, 1, call(ts, "/v1/chat/completions", priorityHeader("low"), opts("old-low", nil)))
	// The low waiter must have waited one aging period longer than the normals behind it:
	// then it counts as (at least) their class for the rest of its wait and, queued earlier,
	// goes first. This sleep is the scenario itself (time passing in the queue), not a
	// synchronization.
	time.Sleep(aging + aging/2)
	n1 := waitInQueue(t, ts, 2, call(ts, "/v1/chat/completions", nil, opts("normal-1", nil)))
	n2 := waitInQueue(t, ts, 3, call(ts, "/v1/chat/completions", nil, opts("normal-2", nil)))
	// A fresh low waiter does not pass them: it is younger than both, whatever its aging.
	newLow := waitInQueue(t, ts, 4, call(ts, "/v1/chat/completions", priorityHeader("low"), opts("new-low", nil)))
	f.release()
	for _, c := range []<-chan result{first, oldLow, n1, n2, newLow} {
		servedBy(t, "waiter", wait(t, c))
	}
	want := []string{"first " + holdMark, "old-low", "normal-1", "normal-2", "new-low"}
	if got := markers(t, f.gpu("solo").backend); !equalStrings(got, want) {
		t.Fatalf("the backend was sent %q, want %q", got, want)
	}
}

// firstAnswered waits for the first of calls to be answered; it returns its name and result.
func firstAnswered(t *testing.T, calls map[string]<-chan result) (string, result) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for time.Now().Before(deadline) {
		for name, c := range calls {
			select {
			case r := <-c:
				if r.err != nil {
					t.Fatalf("%s: http call: %v", name, r.err)
				}
				return name, r
			default:
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("none of %d calls answered within %v", len(calls), waitLimit)
	return "", result{}
}

func TestPriorityFullQueueShedsTheNewestLowerWaiter(t *testing.T) {
	f, ts, first := oneSlot(t, relay.Options{MaxQueueLen: 2})
	openai := routes[0]
	waiting := map[string]<-chan result{}
	enqueue := func(name string, header http.Header, o map[string]any) {
		waiting[name] = call(ts, "/v1/chat/completions", header, opts(name, o))
	}
	shed := func(want string) {
		t.Helper()
		name, r := firstAnswered(t, waiting)
		delete(waiting, name)
		if name != want {
			t.Fatalf("%s was answered (%d %s) where %s should have been shed", name, r.resp.StatusCode, r.body, want)
		}
		checkError(t, openai, r, 429, "queue full")
	}
	refused := func(name string, header http.Header, o map[string]any) {
		t.Helper()
		checkError(t, openai, wait(t, call(ts, "/v1/chat/completions", header, opts(name, o))), 429, "queue full")
	}
	enqueue("low-1", priorityHeader("low"), nil)
	waitInQueue(t, ts, 1, waiting["low-1"])
	enqueue("low-2", priorityHeader("low"), nil)
	waitInQueue(t, ts, 2, waiting["low-2"])

	// Full: a normal arrival sheds the newest low waiter, the next one the other.
	enqueue("normal-1", nil, nil)
	shed("low-2")
	enqueue("normal-2", nil, nil)
	shed("low-1")
	// Nothing lower is left: an arrival of the same class is refused, and so is a lower one.
	refused("normal-3", nil, nil)
	refused("low-3", priorityHeader("low"), nil)
	// A high arrival sheds the newest normal waiter.
	enqueue("high-1", nil, map[string]any{"priority": "high"})
	shed("normal-2")
	if d := queueDepth(t, ts); d != 2 {
		t.Fatalf("queue depth %d after the sheds, want 2", d)
	}

	f.release()
	servedBy(t, "first", wait(t, first))
	for name, c := range waiting {
		servedBy(t, name, wait(t, c))
	}
	want := []string{"first " + holdMark, "high-1", "normal-1"}
	if got := markers(t, f.gpu("solo").backend); !equalStrings(got, want) {
		t.Fatalf("the backend was sent %q, want %q (a shed or refused request reached it)", got, want)
	}
}

func TestPriorityAgedWaiterIsNotShedAsLow(t *testing.T) {
	// A low waiter that has aged one class counts as normal (its class rises with its wait), so a
	// normal arrival at a full queue finds nothing of a strictly lower class to shed: it is
	// refused, and the aged waiter keeps its place. Otherwise a queue kept full by normal
	// traffic would turn every low request away however long it waited.
	const aging = 200 * time.Millisecond
	f, ts, first := oneSlot(t, relay.Options{MaxQueueLen: 2, Scheduling: relay.Scheduling{PriorityAging: aging}})
	oldLow := waitInQueue(t, ts, 1, call(ts, "/v1/chat/completions", priorityHeader("low"), opts("old-low", nil)))
	time.Sleep(aging + aging/2) // the scenario: the low waiter ages past one class
	normal := waitInQueue(t, ts, 2, call(ts, "/v1/chat/completions", nil, opts("normal-1", nil)))
	name, r := firstAnswered(t, map[string]<-chan result{"old-low": oldLow,
		"normal-2": call(ts, "/v1/chat/completions", nil, opts("normal-2", nil))})
	if name != "normal-2" {
		t.Fatalf("a normal arrival shed the aged low waiter (%d %s)", r.resp.StatusCode, r.body)
	}
	checkError(t, routes[0], r, 429, "queue full")
	f.release()
	for _, c := range []<-chan result{first, oldLow, normal} {
		servedBy(t, "waiter", wait(t, c))
	}
	want := []string{"first " + holdMark, "old-low", "normal-1"}
	if got := markers(t, f.gpu("solo").backend); !equalStrings(got, want) {
		t.Fatalf("the backend was sent %q, want %q", got, want)
	}
}

func TestPriorityShedWaiterMovesToItsFallback(t *testing.T) {
	f := newFleet(t, "solo", "spare")
	bs := f.backends()
	bs[0].MaxConcurrent = 1
	bs[1].Models = []string{"alt"}
	_, ts := startServer(t, relay.Options{Timings: quietTimings(), MaxQueueLen: 1, Backends: bs})
	first := call(ts, "/v1/chat/completions", nil, opts("first "+holdMark, nil))
	eventually(t, "the first request held", func() bool { return f.heldTotal() == 1 })
	low := waitInQueue(t, ts, 1, call(ts, "/v1/chat/completions", nil,
		opts("low with a chain", map[string]any{"priority": "low", "fallback_models": []string{"alt"}})))
	high := call(ts, "/v1/chat/completions", nil, opts("high", map[string]any{"priority": "high"}))

	r := wait(t, low)
	if got := servedBy(t, "shed low waiter", r); got != "spare" {
		t.Fatalf("the shed waiter was served by %s, want its fallback's target spare", got)
	}
	if r.resp.Header.Get("X-Modelrelay-Model") != "alt" || r.resp.Header.Get("X-Modelrelay-Fallback-From") != "m" {
		t.Errorf("shed waiter: model %q from %q, want alt from m", r.resp.Header.Get("X-Modelrelay-Model"),
			r.resp.Header.Get("X-Modelrelay-Fallback-From"))
	}
	f.release()
	if got := servedBy(t, "high", wait(t, high)); got != "solo" {
		t.Fatalf("high served by %s", got)
	}
	servedBy(t, "first", wait(t, first))
}

func TestPriorityInvalidIsRefused(t *testing.T) {
	f := newFleet(t, "b1")
	_, ts := startServer(t, relay.Options{Timings: quietTimings(), Backends: f.backends()})
	for _, rt := range routes {
		for _, c := range []struct {
			label  string
			header http.Header
			o      map[string]any
		}{
			{"x_pool_options word", nil, map[string]any{"priority": "urgent"}},
			{"x_pool_options number", nil, map[string]any{"priority": 1}},
			{"header", priorityHeader("urgent"), nil},
			{"header, x_pool_options without priority", priorityHeader("asap"), map[string]any{}},
		} {
			r := wait(t, call(ts, rt.path, c.header, opts("x", c.o)))
			if r.resp.StatusCode != 400 {
				t.Errorf("%s %s: status %d %s, want 400", rt.name, c.label, r.resp.StatusCode, r.body)
				continue
			}
			checkError(t, rt, r, 400, "")
		}
	}
	if n := len(f.gpu("b1").requests()); n != 0 {
		t.Fatalf("the backend saw %d refused requests", n)
	}
	// A valid header alone is fine.
	ask(t, ts, "header high", "/v1/chat/completions", priorityHeader("high"), opts("x", nil))
}

// --- prefer_gpu ----------------------------------------------------------------------------

func TestPreferGPUGetsTheRequestWhileItHasRoom(t *testing.T) {
	for _, cacheAware := range []bool{true, false} {
		t.Run(fmt.Sprintf("cache_aware=%v", cacheAware), func(t *testing.T) {
			f := newFleet(t, "b1", "b2", "b3")
			bs := f.backends()
			bs[2].MaxConcurrent = 2
			_, ts := startServer(t, relay.Options{Timings: quietTimings(), Backends: bs,
				Scheduling: relay.Scheduling{CacheAware: cacheAware}})
			// Round robin would spread these; the preferred target takes them all.
			for i := range 5 {
				if got := ask(t, ts, "preferred", "/v1/chat/completions", nil,
					opts(fmt.Sprint("p", i), map[string]any{"prefer_gpu": "b3"})); got != "b3" {
					t.Fatalf("request %d with prefer_gpu b3 went to %s", i, got)
				}
			}
			// b3 stays preferred while b1 and b2 are idle and b3 already has one in flight ...
			held := call(ts, "/v1/chat/completions", nil, opts("busy "+holdMark, map[string]any{"prefer_gpu": "b3"}))
			eventually(t, "one held on b3", func() bool { return f.gpu("b3").held.Load() == 1 })
			held2 := call(ts, "/v1/chat/completions", nil, opts("busy "+holdMark, map[string]any{"prefer_gpu": "b3"}))
			eventually(t, "two held on b3", func() bool { return f.gpu("b3").held.Load() == 2 })
			// ... and once it is full the request goes elsewhere at once instead of waiting for it.
			if got := ask(t, ts, "preferred but full", "/v1/chat/completions", nil,
				opts("elsewhere", map[string]any{"prefer_gpu": "b3"})); got == "b3" {
				t.Fatalf("a full preferred target got the request")
			}
			// An unknown name is no error: normal selection.
			ask(t, ts, "unknown preference", "/v1/chat/completions", nil, opts("any", map[string]any{"prefer_gpu": "nope"}))
			f.release()
			servedBy(t, "held", wait(t, held))
			servedBy(t, "held", wait(t, held2))
		})
	}
}

func TestPreferGPUNamesARelayWorkerByNameOrID(t *testing.T) {
	_, ts := startServer(t, relay.Options{Timings: quietTimings(), Scheduling: relay.Scheduling{CacheAware: true}})
	ws := []*liveWorker{
		join(t, ts, reg("gpu-a", []string{"m"}, 4)),
		join(t, ts, reg("gpu-b", []string{"m"}, 4)),
	}
	for i, want := range []int{1, 1, 0, 0, 1} {
		prefer := ws[want].ack.WorkerID
		if i%2 == 0 {
			prefer = []string{"gpu-a", "gpu-b"}[want]
		}
		c := call(ts, "/v1/chat/completions", nil, opts("x", map[string]any{"prefer_gpu": prefer}))
		got, req := receiver(t, ws)
		if got != want {
			t.Fatalf("request %d preferring %q went to worker %d", i, prefer, got)
		}
		ws[got].complete(req.RequestID, 200, protocol.Headers{"content-type": "application/json"}, `{"ok":true}`)
		r := wait(t, c)
		if h := r.resp.Header.Get("X-Modelrelay-Target"); h != []string{"gpu-a", "gpu-b"}[want] {
			t.Fatalf("x-modelrelay-target %q for a relay worker, want its worker_name", h)
		}
	}
}

// --- Session affinity ----------------------------------------------------------------------

// sessionKinds are the places a session key comes from, in the contract's order of precedence.
var sessionKinds = []struct {
	name   string
	path   string
	header func(key string) http.Header
	body   func(key, text string) string
}{
	{"x-session-id", "/v1/chat/completions",
		func(key string) http.Header { return http.Header{"X-Session-Id": {key}} },
		func(key, text string) string {
			// The header wins over every body field.
			return chatWith([]any{msg("user", text)}, with("user", "u-"+text, "prompt_cache_key", "pck-"+text))
		}},
	{"prompt_cache_key", "/v1/chat/completions", nil,
		func(key, text string) string {
			return chatWith([]any{msg("user", text)}, with("prompt_cache_key", key, "user", "u-"+text))
		}},
	{"user", "/v1/chat/completions", nil,
		func(key, text string) string {
			return chatWith([]any{msg("user", text)}, with("user", key))
		}},
	{"metadata.user_id", "/v1/messages", nil,
		func(key, text string) string {
			return chatWith([]any{msg("user", text)}, with("max_tokens", 16, "metadata", map[string]any{"user_id": key}))
		}},
}

// with is a map of key/value pairs.
func with(kv ...any) map[string]any {
	m := map[string]any{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

func TestSessionStaysOnOneOfThreeTargets(t *testing.T) {
	for _, kind := range sessionKinds {
		t.Run(kind.name, func(t *testing.T) {
			f := newFleet(t, "b1", "b2", "b3")
			_, ts := startServer(t, relay.Options{Timings: quietTimings(), Backends: f.backends(),
				Scheduling: relay.Scheduling{CacheAware: true}})
			var header http.Header
			if kind.header != nil {
				header = kind.header("conv-1")
			}
			// Short turns (no full prompt block): only the session key can keep them together.
			// Between turns, a request of another session moves the round robin on (one, so that
			// plain round robin over three targets would not bring the turns back by itself).
			var home string
			for turn := 1; turn <= 8; turn++ {
				got := ask(t, ts, "turn", kind.path, header, kind.body("conv-1", fmt.Sprint("turn ", turn)))
				if turn == 1 {
					home = got
				} else if got != home {
					t.Fatalf("turn %d went to %s, turn 1 to %s", turn, got, home)
				}
				ask(t, ts, "other session", kind.path, nil,
					sessionKinds[1].body(fmt.Sprint("other-", turn), fmt.Sprint("other session ", turn)))
			}
		})
	}
}

func TestSessionMovesWhenItsTargetExceedsTheSlack(t *testing.T) {
	for _, c := range []struct {
		name   string
		slack  int // relay.Scheduling.AffinitySlack
		weight float64
		stays  int // calls held on the session's target that it still returns to
	}{
		{"default slack", 0, 1, 2},
		{"slack 1", 1, 1, 1},
		{"no slack", -1, 1, 0},
		{"weight 2", 0, 2, 4}, // a static backend's load is in flight / weight
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFleet(t, "b1", "b2", "b3")
			bs := f.backends()
			bs[1].Weight = c.weight
			_, ts := startServer(t, relay.Options{Timings: quietTimings(), Backends: bs,
				Scheduling: relay.Scheduling{CacheAware: true, AffinitySlack: c.slack}})
			session := http.Header{"X-Session-Id": {"moving"}}
			turn := 0
			next := func(extra map[string]any) string {
				turn++
				return ask(t, ts, fmt.Sprint("turn ", turn), "/v1/chat/completions", session, opts(fmt.Sprint("turn ", turn), extra))
			}
			// The first turn is placed on b2 by preference; the session remembers it.
			if got := next(map[string]any{"prefer_gpu": "b2"}); got != "b2" {
				t.Fatalf("first turn went to %s despite prefer_gpu", got)
			}
			var held []<-chan result
			hold := func(n int) {
				for range n {
					held = append(held, call(ts, "/v1/chat/completions", nil, opts("load "+holdMark, map[string]any{"prefer_gpu": "b2"})))
					want := int32(len(held))
					eventually(t, "load on b2", func() bool { return f.gpu("b2").held.Load() == want })
				}
			}
			hold(c.stays)
			for range 2 {
				if got := next(nil); got != "b2" {
					t.Fatalf("turn %d with %d held on b2 (within the slack) went to %s", turn, c.stays, got)
				}
			}
			hold(1)
			moved := next(nil)
			if moved == "b2" {
				t.Fatalf("turn %d with %d held on b2 (past the slack) stayed there", turn, c.stays+1)
			}
			f.release()
			for _, h := range held {
				servedBy(t, "held", wait(t, h))
			}
			// The session moved: it now returns to its new target, idle b2 or not.
			for range 3 {
				if got := next(nil); got != moved {
					t.Fatalf("turn %d went to %s, want %s where the session moved", turn, got, moved)
				}
			}
		})
	}
}

// --- Prefix placement ----------------------------------------------------------------------

// conversation is a multi-turn chat without a session key: each turn's prompt is the last
// prompt, its answer and a new user message.
type conversation struct {
	name     string
	messages []any
	targets  []string
}

// turn sends the conversation's next user message (n bytes) over the OpenAI route, or the
// Anthropic one (system moved to the top-level field) when anthropic is set.
func (c *conversation) turn(t *testing.T, ts *httptest.Server, n int, anthropic bool) string {
	t.Helper()
	c.messages = append(c.messages, msg("user", prose(fmt.Sprintf("%s turn %d", c.name, len(c.targets)+1), n)))
	path, body := "/v1/chat/completions", chatWith(c.messages, nil)
	if anthropic {
		sys := c.messages[0].(map[string]any)
		path, body = "/v1/messages", chatWith(c.messages[1:], map[string]any{"system": sys["content"], "max_tokens": 64})
	}
	got := ask(t, ts, fmt.Sprintf("%s turn %d", c.name, len(c.targets)+1), path, nil, body)
	c.targets = append(c.targets, got)
	c.messages = append(c.messages, msg("assistant", reply))
	return got
}

func newConversation(name string, systemBytes int) *conversation {
	return &conversation{name: name, messages: []any{msg("system", prose(name+" system", systemBytes))}}
}

// stayed says whether every turn went where the first did.
func (c *conversation) stayed() bool {
	for _, tg := range c.targets {
		if tg != c.targets[0] {
			return false
		}
	}
	return true
}

func TestPrefixLongConversationsWithoutSessionsStayOnTheirTargets(t *testing.T) {
	f := newFleet(t, "b1", "b2", "b3")
	_, ts := startServer(t, relay.Options{Timings: quietTimings(), Backends: f.backends(),
		Scheduling: relay.Scheduling{CacheAware: true}})
	convs := []*conversation{newConversation("alpha", 1500), newConversation("beta", 1500)}
	for turn := 1; turn <= 8; turn++ {
		for _, c := range convs {
			c.turn(t, ts, 400, false)
		}
		// Two unrelated one-off prompts per turn keep the round robin moving: with four requests
		// a round, plain round robin over three targets would move each conversation every turn.
		for i := range 2 {
			ask(t, ts, "one-off", "/v1/chat/completions", nil, chatWith([]any{msg("user", prose(fmt.Sprint("one-off ", turn, i), 1200))}, nil))
		}
	}
	for _, c := range convs {
		if !c.stayed() {
			t.Errorf("conversation %s went to %v, want one target throughout", c.name, c.targets)
		}
	}
	if convs[0].targets[0] == convs[1].targets[0] {
		t.Errorf("both conversations started on %s: round robin should have separated them", convs[0].targets[0])
	}
	// The prompts reached several KB, so every turn was placed on a long match.
	if n := len(chatWith(convs[0].messages, nil)); n < 6000 {
		t.Fatalf("the last prompt is only %d bytes", n)
	}
}

func TestPrefixConversationStaysAcrossDialects(t *testing.T) {
	// The same conversation sent alternately as OpenAI chat and as Anthropic messages hashes
	// alike: prefix blocks hash the canonical text, whichever dialect carried it.
	f := newFleet(t, "b1", "b2", "b3")
	_, ts := startServer(t, relay.Options{Timings: quietTimings(), Backends: f.backends(),
		Scheduling: relay.Scheduling{CacheAware: true}})
	c := newConversation("gamma", 1200)
	for turn := 1; turn <= 6; turn++ {
		c.turn(t, ts, 300, turn%2 == 0)
		ask(t, ts, "one-off", "/v1/chat/completions", nil, chatWith([]any{msg("user", prose(fmt.Sprint("one-off ", turn), 900))}, nil))
	}
	if !c.stayed() {
		t.Fatalf("conversation went to %v across dialects, want one target throughout", c.targets)
	}
}

func TestPrefixSharedSystemPromptDoesNotPullAllTraffic(t *testing.T) {
	f := newFleet(t, "b1", "b2", "b3")
	_, ts := startServer(t, relay.Options{Timings: quietTimings(), Backends: f.backends(),
		Scheduling: relay.Scheduling{CacheAware: true}})
	system := prose("shared assistant", 4096) // 16 blocks: most of every prompt
	// 30 different short conversations, sent in waves of 10 that stay in flight together, each
	// sent once the one before it reached a backend (so every choice sees the loads before it).
	count := map[string]int{}
	for wave := range 3 {
		var pending []<-chan result
		for i := range 10 {
			body := chatWith([]any{msg("system", system), msg("user", fmt.Sprintf("question %d.%d %s", wave, i, holdMark))}, nil)
			pending = append(pending, call(ts, "/v1/chat/completions", nil, body))
			eventually(t, "request at a backend", func() bool { return f.heldTotal() == i+1 })
		}
		f.release()
		for _, c := range pending {
			count[servedBy(t, "shared prefix", wait(t, c))]++
		}
	}
	for _, g := range f.gpus {
		if n := count[g.name]; n < 5 || n > 18 {
			t.Errorf("%s served %d of 30 requests sharing one system prompt (all: %v), want a spread (5..18 each)", g.name, n, count)
		}
	}
}

func TestPrefixLongestMatchWinsThenTheLowerLoad(t *testing.T) {
	f := newFleet(t, "b1", "b2", "b3")
	_, ts := startServer(t, relay.Options{Timings: quietTimings(), Backends: f.backends(),
		Scheduling: relay.Scheduling{CacheAware: true}})
	prefer := func(target string) map[string]any {
		return map[string]any{"x_pool_options": map[string]any{"prefer_gpu": target}}
	}

	// A conversation's first turn ran on b1 and its second on b2 (placed there by preference):
	// both hold a prefix of the third turn, b2 the longer one.
	msgs := []any{msg("system", prose("zeta system", 1200)), msg("user", prose("zeta 1", 400))}
	ask(t, ts, "turn 1", "/v1/chat/completions", nil, chatWith(msgs, prefer("b1")))
	msgs = append(msgs, msg("assistant", reply), msg("user", prose("zeta 2", 400)))
	ask(t, ts, "turn 2", "/v1/chat/completions", nil, chatWith(msgs, prefer("b2")))
	msgs = append(msgs, msg("assistant", reply), msg("user", prose("zeta 3", 400)))
	if got := ask(t, ts, "turn 3", "/v1/chat/completions", nil, chatWith(msgs, nil)); got != "b2" {
		t.Fatalf("turn 3 went to %s, want b2 with the longest prefix", got)
	}

	// Every target holds a shared prompt; b1 and b3 are busier than b2 (one call in flight
	// each, within the slack): the tie goes to the lower load, not to round robin (which
	// would pick b1 after b3, the last one chosen).
	shared := []any{msg("system", prose("eta shared", 2000))}
	for _, g := range []string{"b1", "b2", "b3"} {
		ask(t, ts, "learn "+g, "/v1/chat/completions", nil, chatWith(append(shared, msg("user", "learn")), prefer(g)))
	}
	var held []<-chan result
	for i, g := range []string{"b1", "b3"} {
		held = append(held, call(ts, "/v1/chat/completions", nil, opts("busy "+holdMark, map[string]any{"prefer_gpu": g})))
		eventually(t, "held on "+g, func() bool { return f.heldTotal() == i+1 })
	}
	if got := ask(t, ts, "tie", "/v1/chat/completions", nil, chatWith(append(shared, msg("user", "now")), nil)); got != "b2" {
		t.Fatalf("a prompt every target holds went to %s, want b2, the least loaded", got)
	}
	f.release()
	for _, h := range held {
		servedBy(t, "held", wait(t, h))
	}
}

func TestPrefixWeakMatchIsNotEnough(t *testing.T) {
	// Every prompt starts with the same two blocks and goes on with twelve of its own: a
	// 2/14 match. Below prefix_min_match (0.3) that is round robin; at 0.1 it wins.
	for _, c := range []struct {
		minMatch float64
		spread   bool
	}{{0, true}, {0.1, false}} {
		t.Run(fmt.Sprint("prefix_min_match=", c.minMatch), func(t *testing.T) {
			f := newFleet(t, "b1", "b2", "b3")
			_, ts := startServer(t, relay.Options{Timings: quietTimings(), Backends: f.backends(),
				Scheduling: relay.Scheduling{CacheAware: true, PrefixMinMatch: c.minMatch}})
			common := prose("common opening", 600)
			seen := map[string]int{}
			for i := range 6 {
				body := chatWith([]any{msg("system", common), msg("user", prose(fmt.Sprint("question ", i), 3000))}, nil)
				seen[ask(t, ts, "weak match", "/v1/chat/completions", nil, body)]++
			}
			if spread := len(seen) == 3; spread != c.spread {
				t.Fatalf("requests went to %v; want spread over all three: %v", seen, c.spread)
			}
		})
	}
}

func TestPrefixPlacesANewSession(t *testing.T) {
	// A conversation that gains a session key on its third turn is a new session: it is placed
	// by its prefix, where its first turns ran, and stays there by its key.
	f := newFleet(t, "b1", "b2", "b3")
	_, ts := startServer(t, relay.Options{Timings: quietTimings(), Backends: f.backends(),
		Scheduling: relay.Scheduling{CacheAware: true}})
	c := newConversation("epsilon", 1500)
	for turn := 1; turn <= 5; turn++ {
		if turn < 3 {
			c.turn(t, ts, 300, false)
		} else {
			c.messages = append(c.messages, msg("user", prose(fmt.Sprint("epsilon turn ", turn), 300)))
			got := ask(t, ts, fmt.Sprint("turn ", turn), "/v1/chat/completions", http.Header{"X-Session-Id": {"epsilon"}}, chatWith(c.messages, nil))
			c.targets = append(c.targets, got)
			c.messages = append(c.messages, msg("assistant", reply))
		}
		ask(t, ts, "one-off", "/v1/chat/completions", nil, opts(fmt.Sprint("one-off ", turn), nil))
	}
	if !c.stayed() {
		t.Fatalf("conversation went to %v, want one target throughout", c.targets)
	}
}

func TestSessionExpiresAfterTTL(t *testing.T) {
	const ttl = 100 * time.Millisecond
	f := newFleet(t, "b1", "b2", "b3")
	_, ts := startServer(t, relay.Options{Timings: quietTimings(), Backends: f.backends(),
		Scheduling: relay.Scheduling{CacheAware: true, AffinityTTL: ttl}})
	session := http.Header{"X-Session-Id": {"short-lived"}}
	if got := ask(t, ts, "turn 1", "/v1/chat/completions", session, opts("turn 1", map[string]any{"prefer_gpu": "b2"})); got != "b2" {
		t.Fatalf("turn 1 went to %s despite prefer_gpu", got)
	}
	if got := ask(t, ts, "turn 2", "/v1/chat/completions", session, opts("turn 2", nil)); got != "b2" {
		t.Fatalf("turn 2, right after, went to %s", got)
	}
	time.Sleep(ttl + ttl/2) // the scenario: the session idles past affinity_ttl
	// Forgotten: plain round robin after b2, which served last, picks b3.
	if got := ask(t, ts, "turn 3", "/v1/chat/completions", session, opts("turn 3", nil)); got != "b3" {
		t.Fatalf("turn 3, after the ttl, went to %s, want b3 (round robin, the session forgotten)", got)
	}
}

func TestLeastLoadIgnoresSessionsAndPrefixes(t *testing.T) {
	f := newFleet(t, "b1", "b2", "b3")
	_, ts := startServer(t, relay.Options{Timings: quietTimings(), Backends: f.backends()}) // routing: least_load
	session := http.Header{"X-Session-Id": {"ignored"}}
	c := newConversation("delta", 1500)
	seen := map[string]bool{}
	for turn := 1; turn <= 6; turn++ {
		seen[c.turn(t, ts, 300, false)] = true
		seen[ask(t, ts, "session", "/v1/chat/completions", session, opts(fmt.Sprint("turn ", turn), nil))] = true
	}
	// Sequential requests on idle targets: round robin over all three, whatever the prompt.
	if len(seen) != 3 || c.stayed() {
		t.Fatalf("least_load: conversation went to %v, targets used %v; want round robin", c.targets, seen)
	}
}

// --- x_pool_options stays the relay's ------------------------------------------------------

func TestPoolOptionsNeverReachATarget(t *testing.T) {
	options := []any{
		map[string]any{"priority": "high"},
		map[string]any{"prefer_gpu": "b1"},
		map[string]any{"unknown": 1, "nested": map[string]any{"a": []any{1, "x_pool_options"}}},
		map[string]any{"priority": "low", "prefer_gpu": "nope", "fallback_models": []string{"m"}, "max_latency_ms": 60000, "future": true},
		map[string]any{},
		nil, // "x_pool_options": null
	}
	// b1 speaks whatever it is sent; b2 only OpenAI, so Anthropic requests reach it translated.
	f := newFleet(t, "b1", "b2")
	relays := map[string]*httptest.Server{}
	for _, b := range f.backends() {
		if b.Name == "b2" {
			b.Dialects = []relay.Dialect{relay.OpenAI}
		}
		_, relays[b.Name] = startServer(t, relay.Options{Timings: quietTimings(), Backends: []relay.Backend{b},
			Scheduling: relay.Scheduling{CacheAware: true}})
	}
	for _, target := range []string{"b1", "b2"} {
		for _, o := range options {
			for _, rt := range routes {
				for _, stream := range []bool{false, true} {
					label := fmt.Sprintf("%s stream=%v on %s, x_pool_options %v", rt.name, stream, target, o)
					// The user's text names the key too: only the member goes.
					sent := map[string]any{"model": "m", "stream": stream, "max_tokens": 16, "temperature": 0.5,
						"messages": []any{msg("user", `what is "x_pool_options"?`)}, "x_pool_options": o}
					raw, _ := json.Marshal(sent)
					r := wait(t, call(relays[target], rt.path, nil, string(raw)))
					if r.resp.StatusCode != 200 {
						t.Fatalf("%s: status %d %s", label, r.resp.StatusCode, r.body)
					}
					got := f.gpu(target).requests()
					body := got[len(got)-1].body
					var v map[string]any
					if err := json.Unmarshal([]byte(body), &v); err != nil {
						t.Fatalf("%s: target got %q", label, body)
					}
					if _, ok := v["x_pool_options"]; ok {
						t.Errorf("%s: x_pool_options reached the target: %s", label, body)
					}
					if !strings.Contains(body, "x_pool_options") {
						t.Errorf("%s: the user's text lost its words: %s", label, body)
					}
					if target == "b1" { // untranslated: every other member arrives as sent
						delete(sent, "x_pool_options")
						var want map[string]any
						b, _ := json.Marshal(sent)
						json.Unmarshal(b, &want)
						if !reflect.DeepEqual(v, want) {
							t.Errorf("%s: target got %s, want %s", label, body, b)
						}
					}
				}
			}
		}
	}
	if n := len(f.gpu("b2").requests()); n != len(options)*4 {
		t.Fatalf("b2 saw %d requests, want %d", n, len(options)*4)
	}
}

func TestPoolOptionsNeverReachARelayWorker(t *testing.T) {
	_, ts := startServer(t, relay.Options{Timings: quietTimings(), Scheduling: relay.Scheduling{CacheAware: true}})
	w := join(t, ts, reg("gpu", []string{"m"}, 2))
	for _, rt := range routes {
		body := `{"model":"m","messages":[{"role":"user","content":"hi"}],"x_pool_options":{"priority":"high","prefer_gpu":"gpu","zzz":[1]},"max_tokens":5}`
		c := call(ts, rt.path, nil, body)
		req := w.request()
		var v map[string]any
		if err := json.Unmarshal([]byte(req.Body), &v); err != nil {
			t.Fatalf("%s: worker got %q", rt.name, req.Body)
		}
		if _, ok := v["x_pool_options"]; ok || v["max_tokens"] != 5.0 || v["model"] != "m" {
			t.Errorf("%s: worker got %s", rt.name, req.Body)
		}
		w.complete(req.RequestID, 200, protocol.Headers{"content-type": "application/json"}, `{"ok":true}`)
		wait(t, c)
	}
}

// --- What a pool-aware client sees ---------------------------------------------------------

// poolMeta is the x_pool_meta of an answer.
type poolMeta struct {
	Target      string `json:"target"`
	QueueMS     *int64 `json:"queue_ms"`
	InferenceMS *int64 `json:"inference_ms"`
}

func metaOf(t *testing.T, label string, body []byte) (poolMeta, map[string]any) {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("%s: answer %q is not a JSON object: %v", label, body, err)
	}
	var m struct {
		Meta *poolMeta `json:"x_pool_meta"`
	}
	json.Unmarshal(body, &m)
	if m.Meta == nil {
		return poolMeta{}, v
	}
	return *m.Meta, v
}

func TestTargetHeadersAndPoolMeta(t *testing.T) {
	f := newFleet(t, "b1")
	_, ts := startServer(t, relay.Options{Timings: quietTimings(), Backends: f.backends(), Scheduling: relay.Scheduling{CacheAware: true}})
	for _, rt := range routes {
		// Without x_pool_options: the headers, and the target's body as it sent it.
		r := wait(t, call(ts, rt.path, nil, opts("plain", nil)))
		servedBy(t, rt.name+" plain", r)
		if strings.Contains(string(r.body), "x_pool_meta") {
			t.Errorf("%s: x_pool_meta without x_pool_options: %s", rt.name, r.body)
		}
		if r.resp.Header.Get("X-Backend") != "b1" {
			t.Errorf("%s: the target's own headers were lost: %v", rt.name, r.resp.Header)
		}

		// With x_pool_options (even empty): x_pool_meta besides the target's members.
		for _, o := range []string{`{}`, `{"priority":"low"}`} {
			label := rt.name + " x_pool_options " + o
			r := wait(t, call(ts, rt.path, nil, `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"hi"}],"x_pool_options":`+o+`}`))
			servedBy(t, label, r)
			meta, v := metaOf(t, label, r.body)
			if meta.Target != "b1" || meta.QueueMS == nil || meta.InferenceMS == nil || *meta.QueueMS < 0 || *meta.InferenceMS < 0 {
				t.Errorf("%s: x_pool_meta %+v in %s", label, meta, r.body)
				continue
			}
			if h := r.resp.Header.Get("X-Modelrelay-Queue-Ms"); h != strconv.FormatInt(*meta.QueueMS, 10) {
				t.Errorf("%s: x-modelrelay-queue-ms %q but x_pool_meta.queue_ms %d", label, h, *meta.QueueMS)
			}
			if v["served_by"] != "b1" || v["model"] != "m" || v["id"] == nil {
				t.Errorf("%s: the target's members changed: %s", label, r.body)
			}
			if r.resp.Header.Get("X-Backend") != "b1" || !strings.HasPrefix(r.resp.Header.Get("Content-Type"), "application/json") {
				t.Errorf("%s: headers %v", label, r.resp.Header)
			}
			if cl := r.resp.Header.Get("Content-Length"); cl != "" && cl != strconv.Itoa(len(r.body)) {
				t.Errorf("%s: content-length %s for %d bytes", label, cl, len(r.body))
			}
		}

		// A stream carries the headers only.
		r = wait(t, call(ts, rt.path, nil, `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}],"x_pool_options":{}}`))
		if r.resp.StatusCode != 200 || r.resp.Header.Get("X-Modelrelay-Target") != "b1" || r.resp.Header.Get("X-Modelrelay-Queue-Ms") == "" {
			t.Errorf("%s stream: %d %v", rt.name, r.resp.StatusCode, r.resp.Header)
		}
		if strings.Contains(string(r.body), "x_pool_meta") || !strings.Contains(string(r.body), `"served_by":"b1"`) {
			t.Errorf("%s stream body %q", rt.name, r.body)
		}
	}
}

func TestTargetHeadersOnTargetErrorsAndOtherBodies(t *testing.T) {
	answers := map[string]struct {
		status int
		ctype  string
		body   string
	}{
		"/v1/chat/completions": {400, "application/json", `{"error":{"message":"bad"}}`},
		"/v1/embeddings":       {200, "application/json", `[1,2,3]`},
		"/v1/completions":      {200, "text/plain", `not json`},
	}
	be := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		a := answers[r.URL.Path]
		w.Header().Set("Content-Type", a.ctype)
		w.WriteHeader(a.status)
		io.WriteString(w, a.body)
	})
	_, ts := startServer(t, relay.Options{Timings: quietTimings(), Backends: []relay.Backend{{Name: "only", URL: be.URL, Models: []string{"m"}}}})
	for path, a := range answers {
		r := wait(t, call(ts, path, nil, `{"model":"m","prompt":"x","input":"x","messages":[],"x_pool_options":{}}`))
		if r.resp.StatusCode != a.status || string(r.body) != a.body {
			t.Errorf("%s: got %d %q, want the target's %d %q untouched", path, r.resp.StatusCode, r.body, a.status, a.body)
		}
		if r.resp.Header.Get("X-Modelrelay-Target") != "only" || r.resp.Header.Get("X-Modelrelay-Queue-Ms") == "" {
			t.Errorf("%s: headers %v", path, r.resp.Header)
		}
	}
}

func TestQueueTimeIsReported(t *testing.T) {
	const held = 150 * time.Millisecond
	f, ts, first := oneSlot(t, relay.Options{})
	c := waitInQueue(t, ts, 1, call(ts, "/v1/chat/completions", nil, opts("queued", map[string]any{})))
	time.Sleep(held) // the scenario: the slot stays busy this long
	f.release()
	servedBy(t, "first", wait(t, first))
	r := wait(t, c)
	servedBy(t, "queued", r)
	ms, _ := strconv.Atoi(r.resp.Header.Get("X-Modelrelay-Queue-Ms"))
	if ms < int(held/time.Millisecond) {
		t.Errorf("x-modelrelay-queue-ms %d for a request that waited at least %v", ms, held)
	}
	meta, _ := metaOf(t, "queued", r.body)
	if meta.QueueMS == nil || *meta.QueueMS != int64(ms) {
		t.Errorf("x_pool_meta %+v, header queue-ms %d", meta, ms)
	}
}
