package main

// Added latency at concurrency 1: one client, one keep-alive connection per row, sequential
// non-streaming completions, so a request's time is the path's own cost with no queueing in
// it. What a proxy adds is its row's percentile minus the direct row's.

import (
	"context"
	"net/http"
	"time"
)

const (
	latencyWarmup = 200 // unmeasured requests per row first
	latencyBatch  = 100 // requests a row gets in one turn
)

// LatencyResult is one row's sequential request times.
type LatencyResult struct {
	Row      string
	Samples  []time.Duration
	Errors   int
	P50, P99 time.Duration
}

// latencyRow is a row's own client: one connection, kept alive across all its requests.
type latencyRow struct {
	target Target
	client *http.Client
	res    *LatencyResult
}

// measureLatency sends n sequential completions through every live row. Rows take turns in
// batches of latencyBatch, so background load on the machine falls on all of them alike, while
// within a batch the path stays warm, as it is for a client that keeps calling.
func measureLatency(ctx context.Context, rows []RowResult, n int, logf func(string, ...any)) []LatencyResult {
	live := liveRows(rows)
	out := make([]LatencyResult, len(live))
	paths := make([]latencyRow, len(live))
	for i, r := range live {
		out[i] = LatencyResult{Row: r.Target.Row, Samples: make([]time.Duration, 0, n)}
		t := &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1, DisableCompression: true,
			IdleConnTimeout: time.Minute}
		paths[i] = latencyRow{target: r.Target, client: &http.Client{Transport: t, Timeout: 10 * time.Second}, res: &out[i]}
	}
	defer func() {
		for _, p := range paths {
			p.client.CloseIdleConnections()
		}
	}()
	logf("latency at concurrency 1: %d warm-up + %d requests per row, %d rows in turns", latencyWarmup, n, len(paths))
	for _, p := range paths {
		for range latencyWarmup {
			goRequest(ctx, p.client, p.target)
		}
	}
	for done := 0; done < n && ctx.Err() == nil; done += latencyBatch {
		for _, p := range paths {
			for range min(latencyBatch, n-done) {
				start := time.Now()
				ok := goRequest(ctx, p.client, p.target)
				took := time.Since(start)
				if !ok {
					p.res.Errors++
					continue
				}
				p.res.Samples = append(p.res.Samples, took)
			}
		}
	}
	for i := range out {
		out[i].P50 = percentile(out[i].Samples, 50)
		out[i].P99 = percentile(out[i].Samples, 99)
	}
	return out
}

// liveRows lists the rows that were measured, in table order.
func liveRows(rows []RowResult) []RowResult {
	var out []RowResult
	for _, r := range rows {
		if r.Skipped == "" {
			out = append(out, r)
		}
	}
	return out
}
