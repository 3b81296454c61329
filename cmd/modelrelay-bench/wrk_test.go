package main

import (
	"strings"
	"testing"
	"time"
)

// wrkOutput is what wrk 4.1 prints with --latency (trimmed of the thread stats).
const wrkOutput = `Running 10s test @ http://127.0.0.1:40000/v1/chat/completions
  2 threads and 64 connections
  Latency Distribution
     50%    1.51ms
     75%    2.10ms
     90%    3.33ms
     99%   21.11ms
  423350 requests in 10.00s, 484.00MB read
  Socket errors: connect 0, read 2, write 0, timeout 1
  Non-2xx or 3xx responses: 7
Requests/sec:  42334.90
`

func TestParseWrk(t *testing.T) {
	got, err := parseWrk(wrkOutput)
	if err != nil {
		t.Fatal(err)
	}
	want := LoadResult{Requests: 423350 - 10, Errors: 10, Elapsed: 10 * time.Second,
		P50: 1510 * time.Microsecond, P99: 21110 * time.Microsecond, Tool: "wrk"}
	if got != want {
		t.Errorf("parseWrk:\n got %+v\nwant %+v", got, want)
	}
	if _, err := parseWrk("unable to connect to 127.0.0.1:1 Connection refused"); err == nil {
		t.Error("parseWrk accepted output without a request total")
	}
}

func TestWrkDuration(t *testing.T) {
	for _, c := range []struct {
		value, unit string
		want        time.Duration
	}{
		{"635.91", "us", 635910 * time.Nanosecond},
		{"2.03", "ms", 2030 * time.Microsecond},
		{"1.20", "s", 1200 * time.Millisecond},
		{"1", "m", time.Minute},
	} {
		if got := wrkDuration(c.value, c.unit); got != c.want {
			t.Errorf("wrkDuration(%s%s) = %v, want %v", c.value, c.unit, got, c.want)
		}
	}
}

func TestPercentile(t *testing.T) {
	samples := make([]time.Duration, 100)
	for i := range samples {
		samples[i] = time.Duration(100-i) * time.Millisecond // unsorted on purpose
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{50, 50 * time.Millisecond}, {99, 99 * time.Millisecond}, {100, 100 * time.Millisecond}, {0, time.Millisecond}} {
		if got := percentile(samples, c.p); got != c.want {
			t.Errorf("percentile(%v) = %v, want %v", c.p, got, c.want)
		}
	}
	if got := percentile(nil, 99); got != 0 {
		t.Errorf("percentile of nothing = %v, want 0", got)
	}
}

func TestSelectRows(t *testing.T) {
	rows, err := selectRows("static, Caddy")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, r := range rows {
		keys = append(keys, r.key)
	}
	if got, want := len(keys), 3; got != want || keys[0] != "direct" || keys[1] != "caddy" || keys[2] != "static" {
		t.Errorf("selectRows = %v, want [direct caddy static] in table order", keys)
	}
	rows, err = selectRows("relay static (lean)")
	if err != nil || len(rows) != 2 || rows[1].key != "static-lean" {
		t.Errorf("selectRows by the lean static row's name = %v, %v", rows, err)
	}
	rows, err = selectRows("floor-lean, floor (net/http),floor")
	if err != nil {
		t.Fatal(err)
	}
	keys = keys[:0]
	for _, r := range rows {
		keys = append(keys, r.key)
	}
	if strings.Join(keys, ",") != "direct,floor,floor-lean" {
		t.Errorf("selectRows of the floor rows = %v, want [direct floor floor-lean]", keys)
	}
	if !needsRelay(rows) {
		t.Error("the floor rows run floorproxy, built with the relay, but needsRelay says no build")
	}
	if _, err := selectRows("squid"); err == nil {
		t.Error("selectRows accepted an unknown row")
	}
}
