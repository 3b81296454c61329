package ingress

import (
	"fmt"
	"sync"
	"testing"
)

func testTable() *Table {
	return NewTable(Config{
		WildcardDomain:   ".Models.Example.com",
		AggregationHosts: []string{"API.example.com:443", "ai.models.example.com"},
	}, []Circuit{
		{ID: "c1", Subdomain: "Llama-ABC123", Pool: "circuit:c1"},
		{ID: "c2", Subdomain: "a.b", Pool: "circuit:c2"},
		{ID: "c3", Subdomain: "ai", Pool: "circuit:c3"}, // shadowed by the aggregation host
		{ID: "c4", Pool: "circuit:c4"},                  // no subdomain: only reachable by pool
	})
}

func TestTableResolve(t *testing.T) {
	tbl := testTable()
	cases := []struct {
		host string
		kind HostKind
		sub  string
		id   string
	}{
		{"llama-abc123.models.example.com", HostCircuit, "llama-abc123", "c1"},
		{"a.b.models.example.com", HostCircuit, "a.b", "c2"},
		{"b.models.example.com", HostUnknown, "b", ""},
		{"x.a.b.models.example.com", HostUnknown, "x.a.b", ""},
		{"nope.models.example.com", HostUnknown, "nope", ""},
		{".models.example.com", HostUnknown, "", ""},
		{"models.example.com", HostAggregation, "", ""},
		{"api.example.com", HostAggregation, "", ""},
		{"ai.models.example.com", HostAggregation, "", ""},
		{"evilmodels.example.com", HostOwn, "", ""},
		{"llama-abc123evilmodels.example.com", HostOwn, "", ""},
		{"llama-abc123.models.example.com.evil.org", HostOwn, "", ""},
		{"example.com", HostOwn, "", ""},
		{"localhost", HostOwn, "", ""},
		{"127.0.0.1", HostOwn, "", ""},
		{"::1", HostOwn, "", ""},
		{"", HostOwn, "", ""},
	}
	for _, tc := range cases {
		res := tbl.Resolve(tc.host)
		id := ""
		if res.Circuit != nil {
			id = res.Circuit.ID
		}
		if res.Kind != tc.kind || res.Subdomain != tc.sub || id != tc.id {
			t.Errorf("Resolve(%q) = {%v %q %q}, want {%v %q %q}", tc.host, res.Kind, res.Subdomain, id, tc.kind, tc.sub, tc.id)
		}
		if (res.Problem() != nil) != (tc.kind == HostUnknown) {
			t.Errorf("Resolve(%q).Problem() = %v", tc.host, res.Problem())
		}
	}
	if p := tbl.Resolve("nope.models.example.com").Problem(); p.Status != 400 || p.Msg != "E20009: Subdomain nope not registered" {
		t.Errorf("unknown subdomain problem = %d %q", p.Status, p.Msg)
	}
}

func TestTableWithoutWildcardDomain(t *testing.T) {
	tbl := NewTable(Config{AggregationHosts: []string{"api.example.com"}}, []Circuit{{ID: "c1", Subdomain: "x", Pool: "p"}})
	for host, want := range map[string]HostKind{"api.example.com": HostAggregation, "x": HostOwn, "x.models.example.com": HostOwn} {
		if got := tbl.Resolve(host).Kind; got != want {
			t.Errorf("Resolve(%q) = %v, want %v", host, got, want)
		}
	}
	var nilTable *Table
	if got := nilTable.Resolve("x.models.example.com").Kind; got != HostOwn {
		t.Errorf("nil table Resolve = %v", got)
	}
	if nilTable.ByPool("p") != nil || nilTable.Len() != 0 {
		t.Error("nil table should hold nothing")
	}
}

func TestTableByPoolAndImmutability(t *testing.T) {
	in := []Circuit{{ID: "c1", Subdomain: "One", Pool: "circuit:c1"}, {ID: "c2", Subdomain: "one", Pool: "circuit:c2"}}
	tbl := NewTable(Config{WildcardDomain: ".m.example.com"}, in)
	in[0].ID, in[1].Subdomain = "mutated", "mutated" // the caller's slice is not the table's
	if c := tbl.ByPool("circuit:c1"); c == nil || c.ID != "c1" || c.Subdomain != "one" {
		t.Fatalf("ByPool(circuit:c1) = %+v", c)
	}
	if c := tbl.ByPool("local"); c != nil {
		t.Fatalf("ByPool(local) = %+v, want nil", c)
	}
	// Duplicate subdomain: the later circuit wins.
	if res := tbl.Resolve("one.m.example.com"); res.Circuit == nil || res.Circuit.ID != "c2" {
		t.Fatalf("duplicate subdomain resolved to %+v", res.Circuit)
	}
	if tbl.Len() != 2 {
		t.Fatalf("Len = %d", tbl.Len())
	}
}

// TestRouterSwap reads while reconciles swap tables; run with -race. Every answer must come
// from one whole table: the circuit's subdomain and pool always agree.
func TestRouterSwap(t *testing.T) {
	cfg := Config{WildcardDomain: ".m.example.com"}
	build := func(gen int) *Table {
		return NewTable(cfg, []Circuit{{ID: fmt.Sprint(gen), Subdomain: "x", Pool: fmt.Sprintf("pool-%d", gen)}})
	}
	rt := NewRouter(NewTable(cfg, nil))
	if got := rt.Resolve("x.m.example.com").Kind; got != HostUnknown {
		t.Fatalf("before first reconcile: %v", got)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 2000 {
				res := rt.Resolve("x.m.example.com")
				if res.Kind == HostCircuit && res.Circuit.Pool != "pool-"+res.Circuit.ID {
					errs <- fmt.Errorf("torn circuit %+v", res.Circuit)
					return
				}
			}
		}()
	}
	for gen := range 500 {
		rt.Swap(build(gen))
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if old := rt.Swap(build(9999)); old.ByPool("pool-499") == nil {
		t.Fatal("Swap did not return the previous table")
	}
	if rt.Table().ByPool("pool-9999") == nil {
		t.Fatal("Table() is not the swapped-in table")
	}
	var zero Router
	if got := zero.Resolve("x.m.example.com").Kind; got != HostOwn {
		t.Fatalf("zero Router resolves %v", got)
	}
}
