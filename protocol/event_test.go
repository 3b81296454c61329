package protocol

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/vmihailenco/msgpack/v5"
)

func TestToyAckBytes(t *testing.T) {
	args, err := encodeArgs([]string{"worker-1", "[]"})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.StdEncoding.DecodeString(args)
	want := []byte{0x92, 0xa8, 'w', 'o', 'r', 'k', 'e', 'r', '-', '1', 0xa2, '[', ']'}
	if !bytes.Equal(raw, want) || args != "kqh3b3JrZXItMaJbXQ==" {
		t.Fatalf("args = %q (% x)", args, raw)
	}
	var fixture Envelope
	if err := json.Unmarshal(readFixture(t, "ack-toy.json"), &fixture); err != nil {
		t.Fatal(err)
	}
	if fixture.Args == nil || *fixture.Args != args {
		t.Fatalf("fixture args %v differ from ours %q", fixture.Args, args)
	}
}

func TestEncodeAck(t *testing.T) {
	circuits := fixtureCircuitsText(t)
	b, err := EncodeAck("worker-1", circuits)
	if err != nil {
		t.Fatal(err)
	}
	var env map[string]any
	if err := json.Unmarshal(b, &env); err != nil {
		t.Fatal(err)
	}
	if env["name"] != EventWorkerCircuitAdded || env["source"] != SourceWorker {
		t.Fatalf("name/source: %v", env)
	}
	if env["metadata"] != `{"request_id":null,"user":null}` {
		t.Fatalf("metadata = %#v", env["metadata"])
	}
	// args: msgpack [authority, circuits text verbatim], str type.
	raw, err := base64.StdEncoding.DecodeString(env["args"].(string))
	if err != nil {
		t.Fatal(err)
	}
	var fields []string
	if err := msgpack.Unmarshal(raw, &fields); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fields, []string{"worker-1", circuits}) {
		t.Fatalf("args fields differ")
	}
	if raw[1] != 0xa8 || raw[10] != 0xda { // fixstr authority, str16 circuits (783 bytes)
		t.Fatalf("args not str-typed: % x", raw[:12])
	}
	// payload: same circuit objects.
	var payload struct {
		Authority string            `json:"target_worker_authority"`
		Circuits  []json.RawMessage `json:"circuits"`
	}
	if err := json.Unmarshal([]byte(env["payload"].(string)), &payload); err != nil {
		t.Fatal(err)
	}
	if payload.Authority != "worker-1" || len(payload.Circuits) != 1 {
		t.Fatalf("payload = %+v", payload)
	}
	var fromPayload, fromFixture any
	_ = json.Unmarshal(payload.Circuits[0], &fromPayload)
	var list []any
	_ = json.Unmarshal([]byte(circuits), &list)
	fromFixture = list[0]
	if !reflect.DeepEqual(fromPayload, fromFixture) {
		t.Fatalf("payload circuit differs from inbound")
	}
	// Both fields decode to the same ack.
	e, err := DecodeEnvelope(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []Format{FormatArgs, FormatPayload} {
		ev, err := e.Event(f)
		if err != nil {
			t.Fatal(err)
		}
		ack, ok := ev.(*WorkerCircuitAdded)
		if !ok || ack.Authority != "worker-1" || len(ack.Circuits) != 1 || ack.Circuits[0].ID != fixtureCircuitID {
			t.Fatalf("format %d: %#v", f, ev)
		}
	}
	if _, err := EncodeAck("worker-1", "[not json"); err == nil {
		t.Fatal("ack of invalid circuits text encoded")
	}
}

// fixtureCircuitsText is the circuits_json inside the released created event.
func fixtureCircuitsText(t *testing.T) string {
	t.Helper()
	ev, err := DecodeEvent(readFixture(t, "event-created-released.json"))
	if err != nil {
		t.Fatal(err)
	}
	return ev.(*CircuitCreated).CircuitsJSON
}

func TestDecodeFixtures(t *testing.T) {
	want := wantFixtureCircuit()
	route1 := Route{RouteID: Ptr("f1f2a3b4-c5d6-4e7f-8a9b-0c1d2e3f4a5c"), SessionID: "d2d4e6f8-0a1b-4c3d-8e5f-7a9b1c3d5e70",
		SessionName: Ptr("llama-r1"), KernelHost: Ptr("10.0.1.24"), KernelPort: 8000, Protocol: "http", TrafficRatio: 3.0}
	tests := []struct {
		file  string
		check func(t *testing.T, ev Event)
	}{
		{"event-created-released.json", func(t *testing.T, ev Event) {
			c := ev.(*CircuitCreated)
			checkSet(t, c.CircuitSet, want)
		}},
		{"event-created-payload.json", func(t *testing.T, ev Event) {
			c := ev.(*CircuitCreated)
			checkSet(t, c.CircuitSet, want)
		}},
		{"event-removed-released.json", func(t *testing.T, ev Event) {
			checkSet(t, ev.(*CircuitRemoved).CircuitSet, want)
		}},
		{"event-route-updated-released.json", func(t *testing.T, ev Event) {
			u := ev.(*CircuitRouteUpdated)
			if u.Authority != "worker-1" || !reflect.DeepEqual(u.Circuit, want) {
				t.Fatalf("route update circuit: %+v", u)
			}
			if !reflect.DeepEqual(u.Routes, []Route{wantRoute0(), route1}) {
				t.Fatalf("routes: %+v", u.Routes)
			}
			if !strings.HasPrefix(u.RoutesJSON, `[{"route_id":"e1f2`) || !strings.HasPrefix(u.CircuitJSON, `{"id":"3f1c`) {
				t.Fatalf("raw texts not kept: %.40s / %.40s", u.RoutesJSON, u.CircuitJSON)
			}
		}},
		{"ack-toy.json", func(t *testing.T, ev Event) {
			a := ev.(*WorkerCircuitAdded)
			if a.Authority != "worker-1" || a.CircuitsJSON != "[]" || len(a.Circuits) != 0 {
				t.Fatalf("toy ack: %+v", a)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			ev, err := DecodeEvent(readFixture(t, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, ev)
		})
	}
}

func checkSet(t *testing.T, s CircuitSet, want Circuit) {
	t.Helper()
	if s.Authority != "worker-1" || len(s.Circuits) != 1 || !reflect.DeepEqual(s.Circuits[0], want) {
		t.Fatalf("set: %+v", s)
	}
	if len(s.CircuitsJSON) != 783 || !strings.HasPrefix(s.CircuitsJSON, `[{"id":"3f1c0c8e`) {
		t.Fatalf("circuits text not verbatim (%d bytes)", len(s.CircuitsJSON))
	}
}

func TestPayloadKeepsRawCircuitsText(t *testing.T) {
	// Whitespace and key order of the inbound text survive into CircuitsJSON.
	circuits := `[ {"subdomain":"a", "id":"x"} ]`
	b, err := EncodeCircuitEvent(EventCircuitCreated, "w", circuits, FormatArgs)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := DecodeEvent(b)
	if err != nil {
		t.Fatal(err)
	}
	if got := ev.(*CircuitCreated).CircuitsJSON; got != circuits {
		t.Fatalf("args text = %q", got)
	}
	payload := `{"target_worker_authority":"w","circuits":` + circuits + `}`
	env, _ := json.Marshal(Envelope{Name: EventCircuitCreated, Source: SourceCoordinator, Payload: &payload})
	ev, err = DecodeEvent(env)
	if err != nil {
		t.Fatal(err)
	}
	if got := ev.(*CircuitCreated).CircuitsJSON; got != circuits {
		t.Fatalf("payload text = %q", got)
	}
}

func TestEncodeDecodeBothFormats(t *testing.T) {
	circuits := fixtureCircuitsText(t)
	route := `[{"route-id":"r","session-id":"s","kernel-host":null,"kernel-port":9000}]`
	circuit := circuits[1 : len(circuits)-1]
	for _, f := range []Format{FormatArgs, FormatPayload} {
		for _, name := range []string{EventCircuitCreated, EventCircuitRemoved} {
			b, err := EncodeCircuitEvent(name, "worker-1", circuits, f)
			if err != nil {
				t.Fatal(err)
			}
			ev, err := DecodeEvent(b)
			if err != nil || ev.EventName() != name {
				t.Fatalf("%s/%d: %v %v", name, f, ev, err)
			}
		}
		b, err := EncodeRouteUpdate("worker-1", circuit, route, f)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := DecodeEvent(b)
		if err != nil {
			t.Fatal(err)
		}
		u := ev.(*CircuitRouteUpdated)
		if len(u.Routes) != 1 || u.Routes[0].Host() != "localhost" || u.Routes[0].KernelPort != 9000 || u.Circuit.ID != fixtureCircuitID {
			t.Fatalf("format %d: %+v", f, u)
		}
	}
}

func TestArgsToleratesBin(t *testing.T) {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	_ = enc.EncodeArrayLen(3)
	_ = enc.EncodeBytes([]byte("worker-1"))
	_ = enc.EncodeBytes([]byte("[]"))
	_ = enc.EncodeString("extra elements are ignored")
	args := base64.StdEncoding.EncodeToString(buf.Bytes())
	env, _ := json.Marshal(Envelope{Name: EventCircuitCreated, Args: &args})
	ev, err := DecodeEvent(env)
	if err != nil {
		t.Fatal(err)
	}
	if c := ev.(*CircuitCreated); c.Authority != "worker-1" || c.CircuitsJSON != "[]" {
		t.Fatalf("%+v", c)
	}
}

func TestUnknownEventIsNotAnError(t *testing.T) {
	ev, err := DecodeEvent([]byte(`{"name":"kernel_started","source":"agent","args":"!!not base64"}`))
	if err != nil {
		t.Fatal(err)
	}
	u, ok := ev.(*UnknownEvent)
	if !ok || u.Name != "kernel_started" || u.Source != "agent" {
		t.Fatalf("%#v", ev)
	}
}

func TestDecodeEventRejects(t *testing.T) {
	b64 := func(v any) string {
		b, _ := msgpack.Marshal(v)
		return base64.StdEncoding.EncodeToString(b)
	}
	tests := []struct{ name, in string }{
		{"not json", `hello`},
		{"no name", `{"source":"x"}`},
		{"no body", `{"name":"appproxy_circuit_created_event"}`},
		{"bad base64", `{"name":"appproxy_circuit_created_event","args":"%%%"}`},
		{"not an array", `{"name":"appproxy_circuit_created_event","args":"` + b64("x") + `"}`},
		{"short array", `{"name":"appproxy_circuit_created_event","args":"` + b64([]string{"w"}) + `"}`},
		{"int element", `{"name":"appproxy_circuit_created_event","args":"` + b64([]any{"w", 5}) + `"}`},
		{"circuits not json", `{"name":"appproxy_circuit_created_event","args":"` + b64([]string{"w", "{"}) + `"}`},
		{"route update short", `{"name":"appproxy_circuit_route_updated_event","args":"` + b64([]string{"w", "{}"}) + `"}`},
		{"route update bad routes", `{"name":"appproxy_circuit_route_updated_event","args":"` + b64([]string{"w", `{"id":"x"}`, "null"}) + `"}`},
		{"payload not json", `{"name":"appproxy_circuit_removed_event","payload":"{"}`},
		{"payload no authority", `{"name":"appproxy_circuit_removed_event","payload":"{\"circuits\":[]}"}`},
		{"payload no circuits", `{"name":"appproxy_circuit_removed_event","payload":"{\"target_worker_authority\":\"w\"}"}`},
		{"payload route update no routes", `{"name":"appproxy_circuit_route_updated_event","payload":"{\"target_worker_authority\":\"w\",\"circuit\":{\"id\":\"x\"}}"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := DecodeEvent([]byte(tt.in))
			if err == nil {
				t.Fatalf("decoded %#v", ev)
			}
			if !errors.Is(err, ErrMalformedEvent) {
				t.Fatalf("error %v is not ErrMalformedEvent", err)
			}
		})
	}
}

func TestMetadataObjectTolerated(t *testing.T) {
	env, err := DecodeEnvelope([]byte(`{"name":"n","source":"s","metadata":{"request_id":null}}`))
	if err != nil || env.Metadata == nil || *env.Metadata != `{"request_id":null}` {
		t.Fatalf("%+v %v", env, err)
	}
}

func FuzzDecodeEvent(f *testing.F) {
	for _, name := range []string{"event-created-released.json", "event-created-payload.json",
		"event-removed-released.json", "event-route-updated-released.json", "ack-toy.json"} {
		f.Add(readFixture(f, name))
	}
	f.Add([]byte(`{"name":"x"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ev, err := DecodeEvent(data)
		if err != nil {
			if !errors.Is(err, ErrMalformedEvent) {
				t.Fatalf("error not marked malformed: %v", err)
			}
			return
		}
		// A decoded created event must yield an ack that decodes back to the same circuits.
		if c, ok := ev.(*CircuitCreated); ok {
			b, err := EncodeAck(c.Authority, c.CircuitsJSON)
			if err != nil {
				t.Fatalf("ack of decoded event: %v", err)
			}
			back, err := DecodeEvent(b)
			if err != nil {
				t.Fatalf("decode own ack: %v", err)
			}
			a := back.(*WorkerCircuitAdded)
			// JSON cannot carry invalid UTF-8, so only a valid authority must survive the payload.
			if len(a.Circuits) != len(c.Circuits) || (utf8.ValidString(c.Authority) && a.Authority != c.Authority) {
				t.Fatalf("ack differs from event")
			}
		}
	})
}
