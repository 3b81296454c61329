package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// runBench sets up the shared pieces (temp dir, tools, relay binaries, fake upstream), starts
// every row, measures them in turns (one row under load at a time), and reports.
func runBench(ctx context.Context, opts Options, rows []rowSpec, stdout, stderr io.Writer) error {
	logf := func(format string, args ...any) {
		fmt.Fprintf(stderr, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
	repoRoot, err := findRepoRoot()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "modelrelay-bench-")
	if err != nil {
		return fmt.Errorf("temp dir: %w", err)
	}
	logf("work dir (configs, logs, results): %s", tmp)
	children := NewChildren(tmp)
	defer children.StopAll()

	b := &Bench{ctx: ctx, repoRoot: repoRoot, tmp: tmp, children: children,
		tools: &Tools{skipInstall: opts.SkipInstall, log: logf}, logf: logf}
	load := Load{Duration: opts.Duration, Warmup: opts.Warmup, Passes: opts.Passes, Conns: opts.Conns,
		Streams: opts.Streams, Rounds: opts.Rounds}
	var notes []string
	if load.Wrk, err = b.tools.Find("wrk", "wrk"); err != nil {
		notes = append(notes, "wrk unavailable ("+err.Error()+"): non-streaming figures come from the Go generator")
	}
	if needsRelay(rows) {
		logf("building modelrelay-server, modelrelay-worker, devcoordinator, floorproxy")
		if b.bins, err = buildRelay(repoRoot, filepath.Join(tmp, "bin")); err != nil {
			return err
		}
	}
	if err := b.startUpstream(); err != nil {
		return err
	}

	results := b.startRows(rows, opts)
	stopRows := func() {
		for i := range results {
			results[i].Target.Stop()
			results[i].Target.stop = nil
		}
	}
	defer stopRows()
	measureAll(ctx, tmp, load, results, logf)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	for _, r := range results {
		if r.Skipped == "" {
			logf("%s: %.0f req/s, %d errors, %d/%d streams failed", r.Target.Row, r.Load.RPS(),
				r.Load.Errors, r.SSE.Failed, r.SSE.Streams)
		}
	}
	var extras Extras
	if opts.LatencyRequests > 0 {
		extras.Latency = measureLatency(ctx, results, opts.LatencyRequests, logf)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	if opts.Pprof {
		b.profileRows(results, load)
	} else {
		// The binaries are only worth keeping next to a profile; the rest of the dir is small.
		defer os.RemoveAll(filepath.Join(tmp, "bin"))
	}
	if opts.Held > 0 {
		// The held scenario starts fresh copies of its rows; the main ones are done, and their
		// memory and descriptors are better given back first.
		stopRows()
		extras.Held, extras.HeldNote = b.measureHeld(rows, opts.Held)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return report(stdout, tmp, results, notes, load, extras)
}

// startRows starts every row up front (idle proxies cost nothing) so measureAll can
// interleave them; a row that cannot start is kept as skipped, with the reason.
func (b *Bench) startRows(rows []rowSpec, opts Options) []RowResult {
	var out []RowResult
	for _, spec := range rows {
		if b.ctx.Err() != nil {
			break
		}
		b.logf("%s: starting", spec.row)
		t, err := spec.start(b, opts)
		if err != nil {
			b.logf("%s: skipped: %v", spec.row, err)
			out = append(out, RowResult{Target: Target{Row: spec.row}, Skipped: oneLine(err)})
			continue
		}
		b.logf("%s: serving on %s", spec.row, t.Addr)
		out = append(out, RowResult{Target: t})
	}
	return out
}

// pprofEndpoint is one process of a row that serves net/http/pprof.
type pprofEndpoint struct {
	name string // the process, as in its log's name: relay-static, relay-worker-daemon, …
	addr string
}

// profileRows profiles every row that serves profiles, one row at a time, outside the
// measured passes: a CPU profile of each of its processes under one more non-streaming run,
// another under SSE rounds, then a heap profile of each.
func (b *Bench) profileRows(rows []RowResult, load Load) {
	for _, r := range rows {
		if r.Skipped != "" || len(r.Target.Pprof) == 0 || b.ctx.Err() != nil {
			continue
		}
		t := r.Target
		secs := max(1, int(load.Duration.Seconds())-1)
		b.profileUnder(t, "cpu", secs, func() {
			if _, err := load.nonStreaming(b.ctx, b.tmp, t, load.Duration); err != nil {
				b.logf("pprof: %s: load: %v", t.Row, err)
			}
		})
		const sseSecs = 3
		b.profileUnder(t, "sse-cpu", sseSecs, func() {
			for end := time.Now().Add(sseSecs * time.Second); time.Now().Before(end) && b.ctx.Err() == nil; {
				runSSE(b.ctx, t, load.Streams)
			}
		})
		for _, p := range t.Pprof {
			path := filepath.Join(b.tmp, p.name+"-heap.pprof")
			if err := fetchProfile(b.ctx, "http://"+p.addr+"/debug/pprof/heap", path); err != nil {
				b.logf("pprof: %v", err)
			}
		}
		b.logf("pprof: profiles of %s in %s: <process>-cpu.pprof, -sse-cpu.pprof, -heap.pprof (binaries in %s)",
			t.Row, b.tmp, filepath.Join(b.tmp, "bin"))
	}
}

// profileUnder records a CPU profile of secs seconds from every process of t, saved as
// <process>-<kind>.pprof, while drive puts the load on.
func (b *Bench) profileUnder(t Target, kind string, secs int, drive func()) {
	errs := make(chan error, len(t.Pprof))
	for _, p := range t.Pprof {
		url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", p.addr, secs)
		path := filepath.Join(b.tmp, p.name+"-"+kind+".pprof")
		go func() { errs <- fetchProfile(b.ctx, url, path) }()
	}
	drive()
	for range t.Pprof {
		if err := <-errs; err != nil {
			b.logf("pprof: %v", err)
		}
	}
}

// needsRelay says whether a row runs a binary built from this checkout: the relay rows and the
// floor rows.
func needsRelay(rows []rowSpec) bool {
	for _, r := range rows {
		if strings.HasPrefix(r.row, "relay") || strings.HasPrefix(r.row, "floor") {
			return true
		}
	}
	return false
}

// startUpstream runs the fake model server every row of the main table forwards to.
func (b *Bench) startUpstream() error {
	addr, _, err := b.startFakeUpstream("upstream")
	b.upstream = addr
	return err
}

// startFakeUpstream runs this same binary as a fake model server, in its own process.
func (b *Bench) startFakeUpstream(label string) (string, *exec.Cmd, error) {
	self, err := os.Executable()
	if err != nil {
		return "", nil, fmt.Errorf("find own binary: %w", err)
	}
	addr, err := FreePort()
	if err != nil {
		return "", nil, err
	}
	cmd, err := b.children.Start(label, nil, self, "upstream", "-listen", addr)
	if err != nil {
		return "", nil, err
	}
	if err := WaitHTTP(b.ctx, "http://"+addr+"/v1/models", "", 200, 10*time.Second); err != nil {
		b.children.Stop(cmd)
		return "", nil, err
	}
	return addr, cmd, nil
}

func oneLine(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return strings.ReplaceAll(s, "|", "/")
}
