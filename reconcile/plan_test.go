package reconcile

import (
	"os"
	"testing"

	"modelrelay/protocol"
)

func fixtureCircuits(t testing.TB) []protocol.Circuit {
	t.Helper()
	data, err := os.ReadFile("../testdata/appproxy/circuits.json")
	if err != nil {
		t.Fatal(err)
	}
	circuits, err := protocol.DecodeCircuitList(data)
	if err != nil {
		t.Fatal(err)
	}
	return circuits
}

func ptr[T any](v T) *T { return &v }

func route(id, host string, port int, ratio float64) protocol.Route {
	return protocol.Route{RouteID: ptr(id), SessionID: "s-" + id, KernelHost: ptr(host), KernelPort: port, Protocol: "http", TrafficRatio: ratio}
}

func TestPlanFixture(t *testing.T) {
	c := fixtureCircuits(t)
	d := Plan(c, map[string][]string{c[0].ID: {"llama-3-8b"}}, Options{RouteMaxConcurrent: 4})
	name := PoolName("3f1c0c8e-6b2a-4b8e-9a51-0d2f5e7c9a10")
	spec, ok := d.Pools[name]
	if !ok || len(d.Pools) != 1 {
		t.Fatalf("pools %v", d.Pools)
	}
	if len(spec.Upstreams) != 1 || spec.Upstreams[0].URL != "http://10.0.1.23:8000" || spec.Upstreams[0].Weight != 1 ||
		spec.Upstreams[0].MaxConcurrent != 4 || !spec.ClientHost || spec.Unavailable == nil || spec.Refused == nil {
		t.Fatalf("spec %+v", spec)
	}
	if len(d.Circuits) != 1 || d.Circuits[0].Subdomain != "llama-abc123" || d.Circuits[0].Pool != name || d.Circuits[0].OpenToPublic {
		t.Fatalf("ingress %+v", d.Circuits)
	}
	if got := d.Models["llama-3-8b"]; len(got) != 1 || got[0] != name {
		t.Fatalf("models %v", d.Models)
	}
}

func TestPlanRules(t *testing.T) {
	base := fixtureCircuits(t)[0]
	interactive := base
	interactive.ID, interactive.AppMode = "interactive", "interactive"
	noSub := base
	noSub.ID, noSub.Subdomain = "nosub", nil
	port := base
	port.ID, port.FrontendMode = "port", "port"
	withApp := base
	withApp.ID, withApp.App, withApp.Subdomain = "app", "my-llm", ptr("My-LLM")
	routes := base
	routes.ID, routes.Subdomain = "routes", ptr("routes")
	routes.RouteInfo = []protocol.Route{
		route("a", "10.0.0.1", 8000, 1),
		route("b", "10.0.0.2", 8000, 3),
		route("zero", "10.0.0.3", 8000, 0),
		{RouteID: ptr("sick"), SessionID: "x", KernelHost: ptr("10.0.0.4"), KernelPort: 8000, TrafficRatio: 1, HealthStatus: ptr(protocol.HealthUnhealthy)},
		{RouteID: ptr("local"), SessionID: "y", KernelPort: 9000, TrafficRatio: 1},
		{RouteID: ptr("badport"), SessionID: "z", KernelHost: ptr("10.0.0.5"), KernelPort: 70000, TrafficRatio: 1},
	}
	d := Plan([]protocol.Circuit{interactive, noSub, port, withApp, routes}, nil, Options{})
	if len(d.Pools) != 2 {
		t.Fatalf("want only the two serveable circuits, got %v", d.Pools)
	}
	if got := d.Models["my-llm"]; len(got) != 1 || got[0] != PoolName("app") {
		t.Fatalf("app name not a model: %v", d.Models)
	}
	var urls []string
	for _, u := range d.Pools[PoolName("routes")].Upstreams {
		urls = append(urls, u.URL)
	}
	want := []string{"http://10.0.0.1:8000", "http://10.0.0.2:8000", "http://localhost:9000"}
	if len(urls) != len(want) {
		t.Fatalf("upstreams %v, want %v", urls, want)
	}
	for i := range want {
		if urls[i] != want[i] {
			t.Fatalf("upstreams %v, want %v", urls, want)
		}
	}
	for _, c := range d.Circuits {
		if c.ID == "app" && c.Subdomain != "my-llm" {
			t.Fatalf("subdomain not lowercased: %q", c.Subdomain)
		}
	}
}

func TestKernelSwapIsANewUpstream(t *testing.T) {
	before := route("r1", "10.0.0.1", 8000, 1)
	after := route("r2", "10.0.0.1", 8000, 1)
	if routeKey(before) == routeKey(after) {
		t.Fatal("a new route_id at the same address must be a new upstream")
	}
	if routeKey(before) != routeKey(route("r1", "10.0.0.1", 8000, 5)) {
		t.Fatal("a ratio change must keep the upstream")
	}
}
