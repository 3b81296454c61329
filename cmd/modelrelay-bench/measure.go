package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"time"
)

// Load says how hard and how long every row is driven; the same for all rows of a run.
type Load struct {
	Duration, Warmup time.Duration
	Passes           int    // the non-streaming time of a row is split into this many slices
	Conns            int    // non-streaming connections
	Streams, Rounds  int    // SSE streams at once, and how many waves of them
	Wrk              string // path of wrk; empty = the Go generator
}

// RowResult is everything measured for one row.
type RowResult struct {
	Target  Target
	Skipped string // why the row has no figures
	Load    LoadResult
	CPU     time.Duration // proxy CPU during the measured non-streaming runs
	SSE     SSEResult
	SSECPU  time.Duration // proxy CPU during the SSE rounds
	RSS     int64         // peak resident memory after the SSE rounds, bytes

	p50s, p99s []time.Duration // per pass; the table shows their medians
}

// CPUPer1k is proxy CPU per 1,000 good non-streaming requests.
func (r RowResult) CPUPer1k() time.Duration {
	if r.Load.Requests == 0 {
		return 0
	}
	return time.Duration(float64(r.CPU) * 1000 / float64(r.Load.Requests))
}

// CPUPerChunk is proxy CPU during the SSE rounds per data event delivered: the whole cost of
// streaming (accepting, the request, the head, every chunk) spread over the chunks.
func (r RowResult) CPUPerChunk() time.Duration {
	if r.SSE.Chunks == 0 {
		return 0
	}
	return r.SSECPU / time.Duration(r.SSE.Chunks)
}

func (l Load) nonStreaming(ctx context.Context, tmp string, t Target, d time.Duration) (LoadResult, error) {
	if l.Wrk != "" {
		return runWrk(ctx, l.Wrk, tmp, t, l.Conns, d)
	}
	return runGoLoad(ctx, t, l.Conns, d), nil
}

// measureAll drives every started row. Rows take turns, slice by slice and SSE round by SSE
// round, so that a change in background load on the machine (other jobs, CPU boost) spreads
// over all rows instead of landing on one: the ratios are what the table is for.
func measureAll(ctx context.Context, tmp string, l Load, rows []RowResult, logf func(string, ...any)) {
	live := func(yield func(*RowResult) bool) {
		for i := range rows {
			if rows[i].Skipped == "" && ctx.Err() == nil {
				if !yield(&rows[i]) {
					return
				}
			}
		}
	}
	for r := range live {
		if _, err := l.nonStreaming(ctx, tmp, r.Target, l.Warmup); err != nil {
			r.Skipped = "warm-up: " + oneLine(err)
		}
	}
	slice := l.Duration / time.Duration(l.Passes)
	for pass := range l.Passes {
		logf("non-streaming pass %d/%d (%s per row)", pass+1, l.Passes, slice)
		for r := range live {
			if err := r.onePass(ctx, tmp, l, slice); err != nil {
				r.Skipped = oneLine(err)
			}
		}
	}
	for round := range l.Rounds {
		logf("SSE round %d/%d (%d streams per row)", round+1, l.Rounds, l.Streams)
		for r := range live {
			cpu0 := CPUTime(r.Target.PIDs)
			r.SSE.add(runSSE(ctx, r.Target, l.Streams))
			r.SSECPU += CPUTime(r.Target.PIDs) - cpu0
		}
	}
	for r := range live {
		r.RSS = PeakRSS(r.Target.PIDs)
		r.Load.P50, r.Load.P99 = median(r.p50s), median(r.p99s)
	}
}

// onePass runs one measured non-streaming slice and adds it to the row.
func (r *RowResult) onePass(ctx context.Context, tmp string, l Load, d time.Duration) error {
	cpu0 := CPUTime(r.Target.PIDs)
	res, err := l.nonStreaming(ctx, tmp, r.Target, d)
	r.CPU += CPUTime(r.Target.PIDs) - cpu0
	if err != nil {
		return err
	}
	r.Load.Tool = res.Tool
	r.Load.Requests += res.Requests
	r.Load.Errors += res.Errors
	r.Load.Elapsed += res.Elapsed
	r.p50s = append(r.p50s, res.P50)
	r.p99s = append(r.p99s, res.P99)
	return nil
}

func median(values []time.Duration) time.Duration {
	if len(values) == 0 {
		return 0
	}
	s := slices.Clone(values)
	slices.Sort(s)
	return s[len(s)/2]
}

// fetchProfile saves a pprof profile from the relay's MODELRELAY_PPROF endpoint to path.
func fetchProfile(ctx context.Context, url, path string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("profile request: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("fetch profile %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("fetch profile %s: status %d", url, resp.StatusCode)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("save profile: %w", err)
	}
	defer f.Close()
	if _, err := io.Copy(f, resp.Body); err != nil {
		return fmt.Errorf("save profile: %w", err)
	}
	return nil
}
