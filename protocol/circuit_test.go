package protocol

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const fixtureCircuitID = "3f1c0c8e-6b2a-4b8e-9a51-0d2f5e7c9a10"

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "appproxy", name))
	if err != nil {
		t.Fatalf("read fixture: %v", err)
	}
	return b
}

// wantFixtureCircuit is the circuit every fixture carries.
func wantFixtureCircuit() Circuit {
	return Circuit{
		ID:               fixtureCircuitID,
		App:              "",
		Protocol:         "http",
		Worker:           "a6c7a0d4-1f0e-4d51-8f8e-2b9c6f0b7e21",
		AppMode:          "inference",
		FrontendMode:     "wildcard",
		Envs:             map[string]any{},
		OpenToPublic:     false,
		Subdomain:        Ptr("llama-abc123"),
		UserID:           Ptr("0b8e2f7c-3d1a-4c55-b0a2-6e9f8d7c5b43"),
		EndpointID:       Ptr("9d2e4f6a-8b0c-4d1e-a3f5-7c9b1e3d5f70"),
		RuntimeVariant:   Ptr("vllm"),
		RouteInfo:        []Route{wantRoute0()},
		SessionIDs:       []string{"c2d4e6f8-0a1b-4c3d-8e5f-7a9b1c3d5e7f"},
		CreatedAt:        "2026-08-20T01:02:03.456789Z",
		UpdatedAt:        "2026-08-20T01:02:03.456789Z",
		Arguments:        nil,
		AllowedClientIPs: nil,
		Port:             nil,
	}
}

func wantRoute0() Route {
	return Route{
		RouteID:      Ptr("e1f2a3b4-c5d6-4e7f-8a9b-0c1d2e3f4a5b"),
		SessionID:    "c2d4e6f8-0a1b-4c3d-8e5f-7a9b1c3d5e7f",
		SessionName:  Ptr("llama-r0"),
		KernelHost:   Ptr("10.0.1.23"),
		KernelPort:   8000,
		Protocol:     "http",
		TrafficRatio: 1.0,
	}
}

func TestDecodeCircuitListFixture(t *testing.T) {
	cs, err := DecodeCircuitList(readFixture(t, "circuits.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || !reflect.DeepEqual(cs[0], wantFixtureCircuit()) {
		t.Fatalf("got %+v", cs)
	}
	if !cs[0].Serveable() || cs[0].Host() != "llama-abc123" {
		t.Fatalf("fixture circuit should be serveable at llama-abc123")
	}
	// The fixtures' README (testdata/appproxy/README.md) promises a 783-byte compact list; the
	// circuits events embed exactly it.
	var list struct{ Circuits json.RawMessage }
	if err := json.Unmarshal(readFixture(t, "circuits.json"), &list); err != nil {
		t.Fatal(err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, list.Circuits); err != nil {
		t.Fatal(err)
	}
	if compact.Len() != 783 {
		t.Fatalf("compact circuit list is %d bytes, want 783", compact.Len())
	}
}

func TestCircuitRoundTripSnakeCase(t *testing.T) {
	c := wantFixtureCircuit()
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"route_info":[`, `"session_ids":[`, `"allowed_client_ips":null`,
		`"kernel_host":"10.0.1.23"`, `"traffic_ratio":1`, `"created_at":"2026-08-20T01:02:03.456789Z"`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("marshal lacks %s: %s", key, b)
		}
	}
	if strings.Contains(string(b), "health_status") {
		t.Errorf("health fields written although never received: %s", b)
	}
	var back Circuit
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, c) {
		t.Fatalf("round trip differs:\n%+v\n%+v", back, c)
	}
}

func TestCircuitEmptyCollectionsMarshalAsEmpty(t *testing.T) {
	b, err := json.Marshal(Circuit{ID: "x"})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"envs":{}`, `"route_info":[]`, `"session_ids":[]`, `"subdomain":null`, `"port":null`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("marshal lacks %s: %s", key, b)
		}
	}
}

func TestRouteDecode(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Route
	}{
		{"snake", `{"route_id":"r","session_id":"s","session_name":"n","kernel_host":"h","kernel_port":80,"protocol":"http","traffic_ratio":2.5}`,
			Route{RouteID: Ptr("r"), SessionID: "s", SessionName: Ptr("n"), KernelHost: Ptr("h"), KernelPort: 80, Protocol: "http", TrafficRatio: 2.5}},
		{"kebab", `{"route-id":"r","session-id":"s","session-name":"n","kernel-host":"h","kernel-port":80,"protocol":"http"}`,
			Route{RouteID: Ptr("r"), SessionID: "s", SessionName: Ptr("n"), KernelHost: Ptr("h"), KernelPort: 80, Protocol: "http", TrafficRatio: 1}},
		{"snake wins over kebab", `{"kernel_port":81,"kernel-port":80,"session_id":"s"}`,
			Route{SessionID: "s", KernelPort: 81, TrafficRatio: 1}},
		{"nulls and default ratio", `{"route_id":null,"session_id":"s","session_name":null,"kernel_host":null,"kernel_port":8000,"traffic_ratio":null}`,
			Route{SessionID: "s", KernelPort: 8000, TrafficRatio: 1}},
		{"unknown keys ignored", `{"session_id":"s","kernel_port":1,"future":{"x":[1]}}`,
			Route{SessionID: "s", KernelPort: 1, TrafficRatio: 1}},
		{"health fields", `{"session_id":"s","kernel_port":1,"health_status":"unhealthy","last_health_check":1724115723.5,"consecutive_failures":3}`,
			Route{SessionID: "s", KernelPort: 1, TrafficRatio: 1, HealthStatus: Ptr("unhealthy"),
				LastHealthCheck: json.RawMessage("1724115723.5"), ConsecutiveFailures: Ptr(3)}},
		{"odd health types dropped", `{"session_id":"s","kernel_port":1,"health_status":7,"consecutive_failures":"x"}`,
			Route{SessionID: "s", KernelPort: 1, TrafficRatio: 1}},
		{"zero ratio kept", `{"session_id":"s","kernel_port":1,"traffic_ratio":0}`,
			Route{SessionID: "s", KernelPort: 1, TrafficRatio: 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got Route
			if err := json.Unmarshal([]byte(tt.in), &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestRouteDecodeRejects(t *testing.T) {
	for _, in := range []string{`null`, `[]`, `"x"`, `{"kernel_port":"80"}`, `{"session_id":5}`, `{"traffic_ratio":"1"}`} {
		var r Route
		if err := json.Unmarshal([]byte(in), &r); err == nil {
			t.Errorf("%s: decoded to %+v, want error", in, r)
		}
	}
}

func TestRouteHelpers(t *testing.T) {
	tests := []struct {
		r         Route
		addr      string
		unhealthy bool
		valid     bool
	}{
		{Route{KernelPort: 8000}, "localhost:8000", false, true},
		{Route{KernelHost: Ptr(""), KernelPort: 1}, "localhost:1", false, true},
		{Route{KernelHost: Ptr("fd00::1"), KernelPort: 65535}, "[fd00::1]:65535", false, true},
		{Route{KernelHost: Ptr("10.0.0.1"), KernelPort: 80, HealthStatus: Ptr("unhealthy")}, "10.0.0.1:80", true, true},
		{Route{KernelHost: Ptr("10.0.0.1"), KernelPort: 80, HealthStatus: Ptr("healthy")}, "10.0.0.1:80", false, true},
		{Route{KernelPort: 0}, "localhost:0", false, false},
		{Route{KernelPort: 65536}, "localhost:65536", false, false},
		{Route{KernelPort: 1, TrafficRatio: -1}, "localhost:1", false, false},
	}
	for _, tt := range tests {
		if got := tt.r.Addr(); got != tt.addr {
			t.Errorf("Addr() = %q, want %q", got, tt.addr)
		}
		if got := tt.r.Unhealthy(); got != tt.unhealthy {
			t.Errorf("%s Unhealthy() = %v", tt.addr, got)
		}
		if got := tt.r.Valid() == nil; got != tt.valid {
			t.Errorf("%s Valid() ok = %v, want %v", tt.addr, got, tt.valid)
		}
	}
}

func TestCircuitServeable(t *testing.T) {
	base := wantFixtureCircuit()
	tests := []struct {
		name   string
		mutate func(*Circuit)
		want   bool
	}{
		{"inference wildcard subdomain", func(*Circuit) {}, true},
		{"interactive", func(c *Circuit) { c.AppMode = "interactive" }, false},
		{"port mode", func(c *Circuit) { c.FrontendMode = "port" }, false},
		{"no subdomain", func(c *Circuit) { c.Subdomain = nil }, false},
		{"blank subdomain", func(c *Circuit) { c.Subdomain = Ptr("  ") }, false},
	}
	for _, tt := range tests {
		c := base
		tt.mutate(&c)
		if got := c.Serveable(); got != tt.want {
			t.Errorf("%s: Serveable() = %v (%s)", tt.name, got, c.IgnoreReason())
		}
		if (c.IgnoreReason() == "") != tt.want {
			t.Errorf("%s: IgnoreReason() = %q", tt.name, c.IgnoreReason())
		}
	}
	c := base
	c.Subdomain = Ptr("LLaMA-X")
	if c.Host() != "llama-x" {
		t.Errorf("Host() = %q, want lowercase", c.Host())
	}
}

func TestDecodeCircuitsRejects(t *testing.T) {
	for _, in := range []string{``, `null`, `{}`, `[null]`, `[{}]`, `[{"id":""}]`, `[{"id":1}]`,
		`[{"id":"x","route_info":[null]}]`, `[{"id":"x","port":"80"}]`} {
		if cs, err := DecodeCircuits([]byte(in)); err == nil {
			t.Errorf("%q: decoded %+v, want error", in, cs)
		}
	}
	for _, in := range []string{`{}`, `[]`, `{"circuits":{}}`} {
		if cs, err := DecodeCircuitList([]byte(in)); err == nil {
			t.Errorf("list %q: decoded %+v, want error", in, cs)
		}
	}
	cs, err := DecodeCircuitList([]byte(`{"circuits":null,"extra":1}`))
	if err != nil || cs == nil || len(cs) != 0 {
		t.Errorf("null list: %v %v", cs, err)
	}
}

func FuzzDecodeCircuits(f *testing.F) {
	var list struct{ Circuits json.RawMessage }
	if err := json.Unmarshal(readFixture(f, "circuits.json"), &list); err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(list.Circuits))
	f.Add([]byte(`[{"id":"x","route_info":[{"kernel-port":1,"session-id":"s"}]}]`))
	f.Add([]byte(`[{"id":"x","route_info":[{"health_status":"unhealthy","traffic_ratio":null}]}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		cs, err := DecodeCircuits(data)
		if err != nil {
			return
		}
		// Whatever decodes must re-encode and decode to the same circuits.
		b, err := json.Marshal(cs)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		back, err := DecodeCircuits(b)
		if err != nil {
			t.Fatalf("re-decode %s: %v", b, err)
		}
		if len(back) != len(cs) {
			t.Fatalf("round trip changed length")
		}
		for _, c := range cs {
			_ = c.Serveable()
			for _, r := range c.RouteInfo {
				_ = r.Addr()
			}
		}
	})
}
