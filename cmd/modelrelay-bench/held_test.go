package main

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHeldStreamsLoopback opens held streams against the real fake upstream on loopback: each
// gets its head and first event, stays open while held, and is seen as closed once the server
// drops it.
func TestHeldStreamsLoopback(t *testing.T) {
	srv := httptest.NewServer(upstreamHandler())
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	conns, failed, err := openHeld(context.Background(), Target{Addr: addr}, 50)
	defer closeAll(conns)
	if failed != 0 || len(conns) != 50 {
		t.Fatalf("openHeld: %d open, %d failed (%v), want 50 open", len(conns), failed, err)
	}
	time.Sleep(50 * time.Millisecond) // a stream that was not held would have ended by now
	for i, c := range conns {
		if !stillOpen(c) {
			t.Fatalf("stream %d closed while held", i)
		}
	}

	srv.CloseClientConnections()
	deadline := time.Now().Add(5 * time.Second)
	for _, c := range conns {
		for stillOpen(c) {
			if time.Now().After(deadline) {
				t.Fatal("a stream the server closed still looks open")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// TestOpenHeldRefused: a server that is not there fails every stream, with the reason kept.
func TestOpenHeldRefused(t *testing.T) {
	addr, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	conns, failed, err := openHeld(context.Background(), Target{Addr: addr}, 3)
	if len(conns) != 0 || failed != 3 || err == nil {
		t.Fatalf("openHeld to nothing: %d open, %d failed, err %v; want 0, 3, an error", len(conns), failed, err)
	}
}

func TestNginxHeldConf(t *testing.T) {
	root, err := findRepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "configs", "bench", "nginx.conf.tmpl"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := nginxHeldConf(string(raw), heldPlan{n: 9950, fdLimit: 20000})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"worker_connections 19950;", "worker_rlimit_nofile 20000;\n\nevents {"} {
		if !strings.Contains(got, want) {
			t.Errorf("held nginx config lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "worker_connections 4096") {
		t.Error("held nginx config kept the template's worker_connections")
	}
	if _, err := nginxHeldConf("events {\n}\n", heldPlan{n: 10, fdLimit: 1024}); err == nil {
		t.Error("a config without worker_connections was accepted")
	}
}

func TestVerdict(t *testing.T) {
	for _, tc := range []struct {
		got, bound float64
		want       string
	}{
		{1.2, 1.3, "met (0.10× to spare)"},
		{1.3, 1.3, "met (0.00× to spare)"},
		{1.75, 1.3, "missed by 0.45×"},
	} {
		if got := verdict(tc.got, tc.bound, "%.2f×"); got != tc.want {
			t.Errorf("verdict(%v, %v) = %q, want %q", tc.got, tc.bound, got, tc.want)
		}
	}
}

func TestLatencyMarkdown(t *testing.T) {
	rows := []LatencyResult{
		{Row: "direct", Samples: make([]time.Duration, 10), P50: 60 * time.Microsecond, P99: 120 * time.Microsecond},
		{Row: "nginx", Samples: make([]time.Duration, 10), P50: 100 * time.Microsecond, P99: 200 * time.Microsecond},
		{Row: "relay static", Samples: make([]time.Duration, 10), Errors: 2,
			P50: 80 * time.Microsecond, P99: 300 * time.Microsecond},
	}
	got := LatencyMarkdown(rows)
	for _, want := range []string{
		"| direct | 10 | 60 µs | 120 µs | (baseline) | (baseline) | — | — |",
		"| nginx | 10 | 100 µs | 200 µs | 40 µs | 80 µs | — | — |",
		"| relay static | 10 (+2 failed) | 80 µs | 300 µs | 20 µs | 180 µs | added p50 ≤ 30 µs, p99 ≤ 100 µs | " +
			"p50 met (10 µs to spare); p99 missed by 80 µs |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("latency table lacks\n%s\nin\n%s", want, got)
		}
	}
}

func TestHeldMarkdown(t *testing.T) {
	rows := []HeldResult{
		{Row: "nginx", Asked: 100, Held: 100, Idle: 10 << 20, Loaded: 10<<20 + 100*18*1024},
		{Row: "relay static", Asked: 100, Held: 90, Failed: 10, Idle: 20 << 20, Loaded: 20<<20 + 90*57*1024},
		{Row: "relay worker", Asked: 100, Skipped: "no stream opened"},
	}
	got := HeldMarkdown(rows)
	for _, want := range []string{
		"| nginx | 100 | 10.0 MiB | 11.8 MiB | 18.0 | 1.00× | — | — |",
		"| relay static | 90 of 100 | 20.0 MiB | 25.0 MiB | 57.0 | 3.17× | ≤ 25 KB / stream | missed by 32.0 KB |",
		"| relay worker | skipped: no stream opened |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("held table lacks\n%s\nin\n%s", want, got)
		}
	}
}

func TestChunkCPUMarkdown(t *testing.T) {
	row := func(name string, pids int, cpu time.Duration, chunks int64) RowResult {
		return RowResult{Target: Target{Row: name, PIDs: make([]int, pids)}, SSECPU: cpu, SSE: SSEResult{Chunks: chunks}}
	}
	s := summarize([]RowResult{
		row("direct", 0, 0, 50000),
		row("nginx", 1, time.Second, 50000),
		row("relay static", 1, 1200*time.Millisecond, 50000),
		row("relay worker", 2, 2500*time.Millisecond, 50000),
	})
	got := s.ChunkCPUMarkdown()
	for _, want := range []string{
		"| nginx | 50000 | 1000 ms | 20.0 | 1.00× | (baseline) | — |",
		"| relay static | 50000 | 1200 ms | 24.0 | 1.20× | ≤ 1.3× nginx | met (0.10× to spare) |",
		"| relay worker | 50000 | 2500 ms | 50.0 | 2.50× | ≤ 2.0× nginx | missed by 0.50× |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("chunk CPU table lacks\n%s\nin\n%s", want, got)
		}
	}
	if strings.Contains(got, "| direct |") {
		t.Errorf("chunk CPU table has the direct row, which has no proxy:\n%s", got)
	}
}
