package reconcile

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"modelrelay/ingress"
	"modelrelay/protocol"
	"modelrelay/relay"
)

var hosts = ingress.Config{WildcardDomain: ".models.example.com"}

func newApplier(t testing.TB) (*Applier, *relay.Server, *ingress.Router) {
	srv, err := relay.New(relay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	router := ingress.NewRouter(ingress.NewTable(hosts, nil))
	return NewApplier(srv, router, hosts, Options{}, slog.New(slog.DiscardHandler)), srv, router
}

// replica is a fake model server; hold makes its chat calls wait until released.
type replica struct {
	*httptest.Server
	host string
	port int
	hold chan struct{}
	seen chan struct{}
}

func newReplica(t *testing.T, model string) *replica {
	r := &replica{hold: make(chan struct{}), seen: make(chan struct{}, 16)}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/v1/models" {
			fmt.Fprintf(w, `{"object":"list","data":[{"id":%q}]}`, model)
			return
		}
		io.Copy(io.Discard, req.Body)
		r.seen <- struct{}{}
		<-r.hold
		w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(r.Close)
	u, _ := url.Parse(r.URL)
	r.host = u.Hostname()
	r.port, _ = strconv.Atoi(u.Port())
	return r
}

func circuitWith(id string, routes ...protocol.Route) protocol.Circuit {
	return protocol.Circuit{ID: id, AppMode: "inference", FrontendMode: "wildcard", Protocol: "http",
		Subdomain: ptr("sub-" + id), RouteInfo: routes}
}

func TestApplyIsIdempotentAndKeepsInFlightRequests(t *testing.T) {
	a, srv, router := newApplier(t)
	r1 := newReplica(t, "m")
	r2 := newReplica(t, "m")
	c := circuitWith("c1", route("a", r1.host, r1.port, 1))
	if err := a.Apply(context.Background(), []protocol.Circuit{c}); err != nil {
		t.Fatal(err)
	}
	if res := router.Resolve("sub-c1.models.example.com"); res.Kind != ingress.HostCircuit {
		t.Fatalf("not routable after Apply: %v", res.Kind)
	}
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		srv.ServeInference(w, r, relay.OpenAI, PoolName("c1"))
	}))
	defer front.Close()

	// A request in flight on r1 ...
	var wg sync.WaitGroup
	var status int
	wg.Go(func() {
		resp, err := http.Post(front.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"m"}`))
		if err != nil {
			t.Error(err)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		status = resp.StatusCode
	})
	<-r1.seen
	members := srv.PoolMembers(PoolName("c1"))
	// ... survives applying the same set again and a route update that adds r2 and keeps r1.
	for range 3 {
		if err := a.Apply(context.Background(), []protocol.Circuit{c}); err != nil {
			t.Fatal(err)
		}
	}
	if after := srv.PoolMembers(PoolName("c1")); len(after) != 1 || after[0].ID != members[0].ID || after[0].InFlight != 1 {
		t.Fatalf("re-apply changed the pool: %+v -> %+v", members, after)
	}
	c.RouteInfo = append(c.RouteInfo, route("b", r2.host, r2.port, 3))
	if err := a.Apply(context.Background(), []protocol.Circuit{c}); err != nil {
		t.Fatal(err)
	}
	after := srv.PoolMembers(PoolName("c1"))
	if len(after) != 2 || after[0].ID != members[0].ID || after[0].InFlight != 1 || after[1].Weight != 3 {
		t.Fatalf("route update: %+v", after)
	}
	close(r1.hold)
	wg.Wait()
	if status != 200 {
		t.Fatalf("in-flight request got %d", status)
	}

	// Removal drains: the pool and the host are gone.
	if err := a.Apply(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if srv.PoolMembers(PoolName("c1")) != nil || router.Resolve("sub-c1.models.example.com").Kind != ingress.HostUnknown {
		t.Fatal("removed circuit still routable")
	}
}

func TestModelDiscoveryFillsTheIndex(t *testing.T) {
	a, _, _ := newApplier(t)
	r1 := newReplica(t, "qwen-7b")
	if err := a.Apply(context.Background(), []protocol.Circuit{circuitWith("c1", route("a", r1.host, r1.port, 1))}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go a.Run(ctx, 50*time.Millisecond)
	deadline := time.Now().Add(5 * time.Second)
	for len(a.PoolsFor("qwen-7b")) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("model never discovered")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := a.Circuits(); len(got) != 1 || len(got[0].Models) != 1 || got[0].Models[0] != "qwen-7b" {
		t.Fatalf("circuits view %+v", got)
	}
}

// BenchmarkApply10k reconciles 10,000 circuits from nothing, then re-applies the same set
// (the periodic resync's common case: nothing changed).
func BenchmarkApply10k(b *testing.B) {
	circuits := make([]protocol.Circuit, 10000)
	for i := range circuits {
		circuits[i] = circuitWith(fmt.Sprintf("c%05d", i),
			route(fmt.Sprintf("r%05d", i), "10.1.0.1", 1000+i%60000, 1))
	}
	b.Run("initial", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			a, _, _ := newApplier(b)
			b.StartTimer()
			a.Apply(context.Background(), circuits)
		}
	})
	b.Run("unchanged", func(b *testing.B) {
		a, _, _ := newApplier(b)
		a.Apply(context.Background(), circuits)
		for b.Loop() {
			a.Apply(context.Background(), circuits)
		}
	})
}

// TestApplyingTenThousandCircuitsDropsNoRequest keeps requests flowing through one circuit
// while 10,000 others are applied, re-applied and removed around it.
func TestApplyingTenThousandCircuitsDropsNoRequest(t *testing.T) {
	a, srv, _ := newApplier(t)
	r := newReplica(t, "m")
	close(r.hold)
	go func() {
		for range r.seen {
		}
	}()
	served := circuitWith("served", route("a", r.host, r.port, 1))
	others := make([]protocol.Circuit, 10000)
	for i := range others {
		others[i] = circuitWith(fmt.Sprintf("c%05d", i), route(fmt.Sprintf("r%05d", i), "10.1.0.1", 1000+i%60000, 1))
	}
	if err := a.Apply(context.Background(), []protocol.Circuit{served}); err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		srv.ServeInference(w, req, relay.OpenAI, PoolName("served"))
	}))
	defer front.Close()

	stop := make(chan struct{})
	var failures, total int
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			resp, err := http.Post(front.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"m"}`))
			total++
			if err != nil {
				failures++
				continue
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				failures++
			}
		}
	})
	all := append([]protocol.Circuit{served}, others...)
	for _, set := range [][]protocol.Circuit{all, all, {served}} {
		if err := a.Apply(context.Background(), set); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if failures != 0 || total == 0 {
		t.Fatalf("%d of %d requests failed during the reconciles", failures, total)
	}
}
