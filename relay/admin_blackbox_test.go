package relay_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"modelrelay/protocol"
	"modelrelay/relay"
)

const adminToken = "tok"

func TestAdminForbiddenWithoutToken(t *testing.T) {
	calls := []struct{ method, path string }{
		{http.MethodGet, "/admin/workers"},
		{http.MethodGet, "/admin/stats"},
		{http.MethodPost, "/admin/workers/worker-1/drain"},
		{http.MethodPost, "/admin/workers/worker-1/refresh"},
	}
	_, tsUnset := startServer(t, relay.Options{Timings: quietTimings()})
	_, tsSet := startServer(t, relay.Options{Timings: quietTimings(), AdminToken: adminToken})
	w := join(t, tsSet, reg("w", []string{"m"}, 1))
	for _, c := range calls {
		// Every refusal is 403, as in the Rust server; the message says which setting to check.
		for _, tc := range []struct {
			name  string
			ts    *httptest.Server
			token string
			want  string
		}{
			{"unset/any token", tsUnset, "anything", "admin API is disabled: no admin_token is configured"},
			{"unset/empty", tsUnset, "", "admin API is disabled: no admin_token is configured"},
			{"set/missing", tsSet, "", "admin token required: send Authorization: Bearer <admin_token>"},
			{"set/wrong", tsSet, "nope", "wrong admin token"},
			{"set/prefix", tsSet, adminToken[:2], "wrong admin token"},
		} {
			status, body := callJSON(t, tc.ts, c.method, c.path, tc.token, "")
			if status != http.StatusForbidden || body["error"] != tc.want || len(body) != 1 {
				t.Errorf("%s %s (%s): %d %v, want 403 {\"error\": %q}", c.method, c.path, tc.name, status, body, tc.want)
			}
		}
	}
	// Nothing happened to the worker.
	select {
	case m := <-w.frames:
		t.Fatalf("a refused admin call reached the worker: %#v", m)
	default:
	}
}

func TestAdminWorkersFields(t *testing.T) {
	_, ts := startServer(t, relay.Options{Timings: quietTimings(), AdminToken: adminToken})
	w := join(t, ts, regLoad(" gpu-1 ", []string{"a", "b"}, 3, 1))
	c := goPost(ts, "/v1/chat/completions", chatBody("a", false))
	req := w.request()
	status, v := getJSON(t, ts, "/admin/workers", adminToken)
	if status != 200 {
		t.Fatalf("status %d", status)
	}
	list, _ := v["workers"].([]any)
	if len(list) != 1 {
		t.Fatalf("workers %v", v)
	}
	got := list[0].(map[string]any)
	want := map[string]any{"worker_id": w.ack.WorkerID, "provider": "local", "worker_name": "gpu-1",
		"max_concurrent": 3.0, "reported_load": 2.0, "in_flight_count": 1.0, "is_draining": false}
	for k, x := range want {
		if got[k] != x {
			t.Errorf("%s = %v, want %v", k, got[k], x)
		}
	}
	if models, _ := got["models"].([]any); len(models) != 2 || models[0] != "a" || models[1] != "b" {
		t.Errorf("models %v", got["models"])
	}
	w.complete(req.RequestID, 200, nil, "ok")
	wait(t, c)
	// A completion takes the assignment's 1 off the reported load again.
	eventually(t, "load back to 1", func() bool {
		m := adminWorker(t, ts, adminToken, w.ack.WorkerID)
		return m["reported_load"] == 1.0 && m["in_flight_count"] == 0.0
	})
}

func TestAdminStats(t *testing.T) {
	_, ts := startServer(t, relay.Options{Timings: quietTimings(), AdminToken: adminToken})
	w, held, first := hold(t, ts, "/v1/chat/completions", "m")
	join(t, ts, reg("other", []string{"x"}, 1))
	c := goPost(ts, "/v1/chat/completions", chatBody("m", false))
	waitQueueDepth(t, ts, 1)
	status, v := getJSON(t, ts, "/admin/stats", adminToken)
	if status != 200 {
		t.Fatalf("status %d", status)
	}
	depth, _ := v["queue_depth"].(map[string]any)
	if depth["local"] != 1.0 {
		t.Errorf("queue_depth %v, want {\"local\":1}", v["queue_depth"])
	}
	if v["active_workers"] != 2.0 {
		t.Errorf("active_workers %v, want 2", v["active_workers"])
	}
	w.complete(held.RequestID, 200, nil, "ok")
	wait(t, first)
	req := w.request()
	w.complete(req.RequestID, 200, nil, "ok")
	wait(t, c)
}

func TestAdminDrainIdleWorker(t *testing.T) {
	_, ts := startServer(t, relay.Options{Timings: quietTimings(), AdminToken: adminToken, DrainTimeout: 7 * time.Second})
	// Several rounds: the graceful_shutdown frame must never be lost to the close that follows.
	for i := 0; i < 20; i++ {
		w := join(t, ts, reg("w", []string{"m"}, 1))
		status, _ := callJSON(t, ts, http.MethodPost, "/admin/workers/"+w.ack.WorkerID+"/drain", adminToken, "")
		if status != http.StatusAccepted {
			t.Fatalf("drain status %d, want 202", status)
		}
		code, reason, before := w.closeFrame()
		if len(before) != 1 {
			t.Fatalf("round %d: frames before close: %#v, want one graceful_shutdown", i, before)
		}
		gs, ok := before[0].(protocol.GracefulShutdown)
		if !ok || gs.Reason == nil || *gs.Reason != "admin drain" || gs.DrainTimeoutSecs == nil || *gs.DrainTimeoutSecs != 7 {
			t.Fatalf("got %#v, want graceful_shutdown reason \"admin drain\" drain_timeout_secs 7", before[0])
		}
		if code != 1000 || reason != "graceful shutdown complete" {
			t.Fatalf("close %d %q, want 1000 \"graceful shutdown complete\"", code, reason)
		}
	}
}

func TestAdminDrainBusyWorkerAfterLastResponse(t *testing.T) {
	_, ts := startServer(t, relay.Options{Timings: quietTimings(), AdminToken: adminToken})
	w := join(t, ts, reg("w", []string{"m"}, 2))
	c := goPost(ts, "/v1/chat/completions", chatBody("m", false))
	req := w.request()
	status, _ := callJSON(t, ts, http.MethodPost, "/admin/workers/"+w.ack.WorkerID+"/drain", adminToken, `{"timeout_secs": 30}`)
	if status != http.StatusAccepted {
		t.Fatalf("drain status %d", status)
	}
	gs, ok := w.next().(protocol.GracefulShutdown)
	if !ok || gs.DrainTimeoutSecs == nil || *gs.DrainTimeoutSecs != 30 {
		t.Fatalf("got %#v, want graceful_shutdown with drain_timeout_secs 30", gs)
	}
	eventually(t, "draining in /health", func() bool { return healthWorker(t, ts, w.ack.WorkerID)["is_draining"] == true })
	// A draining worker takes no new work, even with room: this one waits in the queue.
	queued := goPost(ts, "/v1/chat/completions", markedBody("m", false, "queued"))
	waitQueueDepth(t, ts, 1)
	w.complete(req.RequestID, 200, nil, "last")
	if r := wait(t, c); string(r.body) != "last" {
		t.Fatalf("in-flight request got %q", r.body)
	}
	code, reason, before := w.closeFrame()
	if len(before) != 0 {
		t.Fatalf("frames after drain began: %#v", before)
	}
	if code != 1000 || reason != "graceful shutdown complete" {
		t.Fatalf("close %d %q, want 1000 \"graceful shutdown complete\"", code, reason)
	}
	w2 := join(t, ts, reg("w2", []string{"m"}, 1))
	r2 := w2.request()
	w2.complete(r2.RequestID, 200, nil, "ok")
	wait(t, queued)
}

func TestAdminDrainTimesOut(t *testing.T) {
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			_, ts := startServer(t, relay.Options{Timings: quietTimings(), AdminToken: adminToken})
			w := join(t, ts, reg("w", []string{"m"}, 1))
			c := goPost(ts, rt.path, chatBody("m", false))
			w.request()
			status, _ := callJSON(t, ts, http.MethodPost, "/admin/workers/"+w.ack.WorkerID+"/drain", adminToken, `{"timeout_secs": 0.3}`)
			if status != http.StatusAccepted {
				t.Fatalf("drain status %d", status)
			}
			code, reason, before := w.closeFrame()
			if len(before) == 0 {
				t.Fatal("no graceful_shutdown before the close")
			}
			if gs, ok := before[0].(protocol.GracefulShutdown); !ok || gs.DrainTimeoutSecs == nil || *gs.DrainTimeoutSecs != 1 {
				t.Errorf("got %#v, want graceful_shutdown with drain_timeout_secs 1 (whole seconds, minimum 1)", before[0])
			}
			if code != 1000 || reason != "graceful shutdown timed out" {
				t.Errorf("close %d %q, want 1000 \"graceful shutdown timed out\"", code, reason)
			}
			checkError(t, rt, wait(t, c), 503, "server is shutting down")
		})
	}
}

func TestAdminRefresh(t *testing.T) {
	_, ts := startServer(t, relay.Options{Timings: quietTimings(), AdminToken: adminToken})
	w := join(t, ts, reg("w", []string{"m"}, 1))
	status, _ := callJSON(t, ts, http.MethodPost, "/admin/workers/"+w.ack.WorkerID+"/refresh", adminToken, "")
	if status != http.StatusAccepted {
		t.Fatalf("refresh status %d, want 202", status)
	}
	mr, ok := w.next().(protocol.ModelsRefresh)
	if !ok || mr.Reason == nil || *mr.Reason != "admin" {
		t.Fatalf("got %#v, want models_refresh reason admin", mr)
	}
	// The answer updates what the worker serves.
	w.send(protocol.ModelsUpdate{Models: []string{"m", "new"}, CurrentLoad: 0})
	eventually(t, "new model listed", func() bool { return equalStrings(modelIDs(t, ts), []string{"m", "new"}) })
}

func TestAdminUnknownWorker404(t *testing.T) {
	_, ts := startServer(t, relay.Options{Timings: quietTimings(), AdminToken: adminToken})
	for _, action := range []string{"drain", "refresh"} {
		if status, _ := callJSON(t, ts, http.MethodPost, "/admin/workers/worker-99/"+action, adminToken, ""); status != 404 {
			t.Errorf("%s of unknown worker: status %d, want 404", action, status)
		}
	}
}

func TestHealthFields(t *testing.T) {
	_, ts := startServer(t, relay.Options{Timings: quietTimings(), Version: "9.9.9-test"})
	w := join(t, ts, reg("w", []string{"a", "*"}, 2))
	c := goPost(ts, "/v1/chat/completions", chatBody("a", false))
	req := w.request()
	status, h := getJSON(t, ts, "/health", "")
	if status != 200 || h["status"] != "ok" || h["version"] != "9.9.9-test" || h["workers_connected"] != 1.0 || h["queue_depth"] != 0.0 {
		t.Fatalf("health %d %v", status, h)
	}
	if _, ok := h["uptime_secs"].(float64); !ok {
		t.Errorf("uptime_secs %v is not a number", h["uptime_secs"])
	}
	workers, _ := h["workers"].([]any)
	if len(workers) != 1 {
		t.Fatalf("workers %v", h["workers"])
	}
	e := workers[0].(map[string]any)
	want := map[string]any{"id": w.ack.WorkerID, "provider": "local", "in_flight": 1.0, "max_concurrent": 2.0, "is_draining": false}
	for k, x := range want {
		if e[k] != x {
			t.Errorf("workers[0].%s = %v, want %v", k, e[k], x)
		}
	}
	if _, ok := e["models"].([]any); !ok {
		t.Errorf("workers[0].models %v", e["models"])
	}
	w.complete(req.RequestID, 200, nil, "ok")
	wait(t, c)
}

func TestLivezReadyzStatus(t *testing.T) {
	srv, ts := startServer(t, relay.Options{Timings: quietTimings()})
	if status, _ := getJSON(t, ts, "/livez", ""); status != 200 {
		t.Errorf("/livez %d", status)
	}
	if status, _ := getJSON(t, ts, "/readyz", ""); status != 200 {
		t.Errorf("/readyz %d", status)
	}
	release := srv.HoldReady()
	if status, _ := getJSON(t, ts, "/readyz", ""); status != 503 {
		t.Errorf("/readyz while held %d, want 503", status)
	}
	release()
	if status, _ := getJSON(t, ts, "/readyz", ""); status != 200 {
		t.Errorf("/readyz after release %d", status)
	}
	status, v := getJSON(t, ts, "/status", "")
	if status != 200 || v["api_version"] != "v2" || len(v) != 1 {
		t.Errorf("/status %d %v", status, v)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	srv.Drain(ctx)
	if status, _ := getJSON(t, ts, "/livez", ""); status != 200 {
		t.Errorf("/livez while draining %d", status)
	}
}

func TestMetricsSeries(t *testing.T) {
	_, ts := startServer(t, relay.Options{Timings: quietTimings()})
	w := join(t, ts, reg("w", []string{"m"}, 1))
	c := goPost(ts, "/v1/chat/completions", chatBody("m", false))
	req := w.request()
	w.complete(req.RequestID, 200, nil, "ok")
	wait(t, c)
	wait(t, goPost(ts, "/v1/chat/completions", chatBody("ghost", false)))
	r := wait(t, goCall(context.Background(), http.MethodGet, ts.URL+"/metrics", "", nil))
	text := string(r.body)
	if r.resp.StatusCode != 200 || !strings.HasPrefix(r.resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("/metrics %d %q", r.resp.StatusCode, r.resp.Header.Get("Content-Type"))
	}
	for _, series := range []string{
		`modelrelay_requests_total{route="/v1/chat/completions",status="200"} 1`,
		`modelrelay_requests_total{route="/v1/chat/completions",status="404"} 1`,
		`modelrelay_queue_depth{pool="local"} 0`,
		`modelrelay_workers_connected 1`,
		`modelrelay_target_in_flight{pool="local",target="` + w.ack.WorkerID + `"} 0`,
		`modelrelay_time_to_first_byte_seconds_bucket`,
		`modelrelay_request_duration_seconds_bucket`,
	} {
		if !strings.Contains(text, series) {
			t.Errorf("/metrics lacks %s", series)
		}
	}
}
