package appproxytest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"modelrelay/protocol"
)

const secret = "test-secret"

const validBody = `{"authority":"w","frontend_mode":"wildcard","protocol":"http","hostname":"h","tls_listen":false,` +
	`"tls_advertised":false,"api_port":10201,"port_range":null,"wildcard_domain":".d","wildcard_traffic_port":443,` +
	`"filtered_apps_only":false,"traefik_last_used_marker_path":null,"accepted_traffics":["inference"],"app_filters":[]}`

func call(t *testing.T, url, method, path, body string, header map[string]string) (int, map[string]any, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, url+path, rd)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return resp.StatusCode, m, resp.Header.Get("Content-Type")
}

func good() map[string]string {
	return map[string]string{"X-BackendAI-Token": secret, "X-BackendAI-RequestID": "0b8e2f7c-3d1a-4c55-b0a2-6e9f8d7c5b43",
		"Accept": "application/json", "Content-Type": "application/json"}
}

func with(k, v string) map[string]string {
	h := good()
	if v == "" {
		delete(h, k)
	} else {
		h[k] = v
	}
	return h
}

func TestCoordinatorValidation(t *testing.T) {
	c := NewCoordinator(secret, "")
	srv := httptest.NewServer(c)
	defer srv.Close()
	missingKey := strings.Replace(validBody, `"app_filters":[],`, "", 1)
	missingKey = strings.Replace(missingKey, `,"app_filters":[]`, "", 1)
	tests := []struct {
		name, method, path, body string
		header                   map[string]string
		status                   int
		slug                     string
	}{
		{"no accept answers html", "PUT", "/api/worker", validBody, with("Accept", ""), 406, ""},
		{"wrong token", "PUT", "/api/worker", validBody, with("X-BackendAI-Token", "nope"), 401, "invalid-credentials"},
		{"no request id", "PUT", "/api/worker", validBody, with("X-BackendAI-RequestID", ""), 400, "invalid-api-params"},
		{"request id not uuid", "PUT", "/api/worker", validBody, with("X-BackendAI-RequestID", "123"), 400, "invalid-api-params"},
		{"no content type", "PUT", "/api/worker", validBody, with("Content-Type", ""), 400, "invalid-api-params"},
		{"missing key", "PUT", "/api/worker", missingKey, good(), 400, "invalid-api-params"},
		{"bad type", "PUT", "/api/worker", strings.Replace(validBody, `"api_port":10201`, `"api_port":"10201"`, 1), good(), 400, "invalid-api-params"},
		{"trailing slash", "PUT", "/api/worker/", validBody, good(), 404, "generic-not-found"},
		{"unknown worker heartbeat", "PATCH", "/api/worker/0b8e2f7c-3d1a-4c55-b0a2-6e9f8d7c5b43", "", good(), 404, "object-not-found"},
		{"unknown worker pull", "GET", "/api/worker/x/circuits", "", good(), 404, "object-not-found"},
		{"valid", "PUT", "/api/worker", validBody, good(), 200, ""},
	}
	for _, tt := range tests {
		status, body, ctype := call(t, srv.URL, tt.method, tt.path, tt.body, tt.header)
		if status != tt.status {
			t.Errorf("%s: status %d, want %d (%v)", tt.name, status, tt.status, body)
			continue
		}
		if tt.slug != "" && (body["type"] != "https://api.backend.ai/probs/"+tt.slug || body["title"] == nil || ctype != "application/problem+json") {
			t.Errorf("%s: problem %v (%s)", tt.name, body, ctype)
		}
	}
	status, w, _ := call(t, srv.URL, "PUT", "/api/worker", validBody, good())
	if status != 200 || w["nodes"] != 2.0 || w["available_slots"] != -1.0 {
		t.Fatalf("second registration %v", w)
	}
	id := w["id"].(string)
	c.FailWith(500)
	if status, _, _ := call(t, srv.URL, "PATCH", "/api/worker/"+id, "", good()); status != 500 {
		t.Fatalf("FailWith: %d", status)
	}
	c.FailWith(0)
	if status, _, _ := call(t, srv.URL, "PATCH", "/api/worker/"+id, "", good()); status != 200 {
		t.Fatalf("heartbeat: %d", status)
	}
	if status, body, _ := call(t, srv.URL, "GET", "/api/worker/"+id+"/circuits", "", good()); status != 200 || body["circuits"] == nil {
		t.Fatalf("pull: %d %v", status, body)
	}
	if status, body, _ := call(t, srv.URL, "DELETE", "/api/worker/"+id, "", good()); status != 200 || body["success"] != true {
		t.Fatalf("delete: %d %v", status, body)
	}
	if c.Nodes("w") != 1 {
		t.Fatalf("nodes %d", c.Nodes("w"))
	}
	c.Forget("someone-else")
	if status, _, _ := call(t, srv.URL, "PATCH", "/api/worker/"+id, "", good()); status != 200 {
		t.Fatalf("forgot the wrong worker: %d", status)
	}
	c.Forget("w")
	if status, _, _ := call(t, srv.URL, "PATCH", "/api/worker/"+id, "", good()); status != 404 {
		t.Fatalf("forgotten worker: %d", status)
	}
}

func TestStartRedisRestartsOnSameAddress(t *testing.T) {
	addr, stop := StartRedis(t)
	c := NewCoordinator(secret, addr)
	defer c.Close()
	ctx := context.Background()
	if err := c.Publish(ctx, []byte("x")); err != nil {
		t.Fatal(err)
	}
	stop()
	if err := c.Publish(ctx, []byte("x")); err == nil {
		t.Fatal("publish worked with redis stopped")
	}
	StartRedisAt(t, addr)
	if err := c.Publish(ctx, []byte("x")); err != nil {
		t.Fatalf("after restart: %v", err)
	}
}

func TestAckDecoding(t *testing.T) {
	msg, err := protocol.EncodeAck("worker-1", `[{"id":"c1"}]`)
	if err != nil {
		t.Fatal(err)
	}
	a := decodeAck(msg)
	if a == nil || a.Args == nil || a.Payload == nil || !a.Has("c1") || a.Has("c2") {
		t.Fatalf("%+v", a)
	}
	if decodeAck([]byte(`{"name":"appproxy_circuit_created_event","args":"kqh3b3JrZXItMaJbXQ=="}`)) != nil {
		t.Fatal("a created event taken for an ack")
	}
}
