package protocol

import (
	"encoding/json"
	"testing"
)

func TestRegistrationBodyMatchesSpec(t *testing.T) {
	reg := NewInferenceRegistration("modelrelay-1", "router.example.com", 10201, false, true, ".models.example.com", 443)
	b, err := json.Marshal(reg)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"authority":"modelrelay-1","frontend_mode":"wildcard","protocol":"http",` +
		`"hostname":"router.example.com","tls_listen":false,"tls_advertised":true,"api_port":10201,` +
		`"port_range":null,"wildcard_domain":".models.example.com","wildcard_traffic_port":443,` +
		`"filtered_apps_only":false,"traefik_last_used_marker_path":null,` +
		`"accepted_traffics":["inference"],"app_filters":[]}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	b, _ = json.Marshal(WorkerRegistration{})
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	if m["accepted_traffics"] == nil || m["app_filters"] == nil || len(m) != 14 {
		t.Fatalf("zero registration must still carry every key with lists: %s", b)
	}
	// node_id only when configured: older coordinators refuse unknown fields.
	reg.NodeID = "relay-a"
	b, _ = json.Marshal(reg)
	if want := want[:len(want)-1] + `,"node_id":"relay-a"}`; string(b) != want {
		t.Fatalf("with a node id: got %s\nwant %s", b, want)
	}
}

func TestDecodeWorker(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantID  string
		wantErr bool
	}{
		{"full", `{"id":"w1","authority":"a","available_slots":-1,"occupied_slots":0,"nodes":2,"slots":[],` +
			`"created_at":"2026-08-20T01:02:03Z","future":{"x":1}}`, "w1", false},
		{"drifted field types keep the id", `{"id":"w2","authority":"a","nodes":"two","api_port":"x"}`, "w2", false},
		{"no id", `{"authority":"a"}`, "", true},
		{"id of wrong type", `{"id":5}`, "", true},
		{"not an object", `[]`, "", true},
		{"html", `<html>`, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := DecodeWorker([]byte(tt.in))
			if (err != nil) != tt.wantErr || w.ID != tt.wantID {
				t.Fatalf("got %+v, %v", w, err)
			}
			if tt.wantID != "" && w.Authority != "a" {
				t.Fatalf("authority lost: %+v", w)
			}
		})
	}
	w, _ := DecodeWorker([]byte(`{"id":"w","available_slots":-1,"nodes":3}`))
	if w.AvailableSlots != -1 || w.Nodes != 3 {
		t.Fatalf("%+v", w)
	}
}

func FuzzDecodeWorker(f *testing.F) {
	f.Add([]byte(`{"id":"w1","authority":"a","available_slots":-1,"occupied_slots":0,"nodes":2,"slots":[],"created_at":"2026-08-20T01:02:03Z"}`))
	f.Add([]byte(`{"id":"w2","nodes":"two"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		w, err := DecodeWorker(data)
		if err == nil && w.ID == "" {
			t.Fatal("decoded a worker without id")
		}
	})
}
