package appproxy_test

import (
	"testing"

	"modelrelay/appproxy"
	"modelrelay/protocol"
)

func circuit(id string, ports ...int) protocol.Circuit {
	c := protocol.Circuit{ID: id, AppMode: "inference", FrontendMode: "wildcard", Subdomain: protocol.Ptr(id)}
	for _, p := range ports {
		c.RouteInfo = append(c.RouteInfo, protocol.Route{SessionID: "s", KernelPort: p, TrafficRatio: 1})
	}
	return c
}

func ids(cs []protocol.Circuit) string {
	s := ""
	for _, c := range cs {
		s += c.ID + ","
	}
	return s
}

func TestStore(t *testing.T) {
	s := appproxy.NewStore()
	steps := []struct {
		name    string
		op      func() bool
		changed bool
		want    string
	}{
		{"add", func() bool { return s.Add(circuit("b"), circuit("a")) }, true, "a,b,"},
		{"add same", func() bool { return s.Add(circuit("a")) }, false, "a,b,"},
		{"add changed", func() bool { return s.Add(circuit("a", 80)) }, true, "a,b,"},
		{"routes", func() bool { return s.SetRoutes(circuit("b", 1), circuit("x", 8000, 8001).RouteInfo) }, true, "a,b,"},
		{"routes same", func() bool { return s.SetRoutes(circuit("b"), circuit("x", 8000, 8001).RouteInfo) }, false, "a,b,"},
		{"routes upsert", func() bool { return s.SetRoutes(circuit("c", 1), circuit("x", 9).RouteInfo) }, true, "a,b,c,"},
		{"remove", func() bool { return s.Remove("a", "zz") }, true, "b,c,"},
		{"remove unknown", func() bool { return s.Remove("zz") }, false, "b,c,"},
		{"replace", func() bool { return s.Replace([]protocol.Circuit{circuit("d")}) }, true, "d,"},
		{"replace same", func() bool { return s.Replace([]protocol.Circuit{circuit("d")}) }, false, "d,"},
		{"replace empty", func() bool { return s.Replace(nil) }, true, ""},
	}
	for _, st := range steps {
		if got := st.op(); got != st.changed {
			t.Errorf("%s: changed = %v", st.name, got)
		}
		if got := ids(s.Circuits()); got != st.want {
			t.Errorf("%s: set %q, want %q", st.name, got, st.want)
		}
	}
}

func TestStoreRouteSetReplacesStaleRouteInfo(t *testing.T) {
	s := appproxy.NewStore()
	s.SetRoutes(circuit("c", 1, 2, 3), circuit("x", 9).RouteInfo)
	got := s.Circuits()[0].RouteInfo
	if len(got) != 1 || got[0].KernelPort != 9 {
		t.Fatalf("routes %+v", got)
	}
	s.SetRoutes(circuit("c"), nil)
	if n := len(s.Circuits()[0].RouteInfo); n != 0 {
		t.Fatalf("%d routes after empty update", n)
	}
}
