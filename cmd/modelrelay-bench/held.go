package main

// The held-streams scenario: -held SSE streams open at once through one row, all idle (the fake
// upstream sends the head and one event, then nothing), and what they cost the row in memory:
// (RSS with the streams held − RSS just before) / streams. Rows run it one at a time, after the
// main table, each on a fresh copy of itself (heldrows.go).

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	heldOpeners = 128                    // streams being opened at once
	heldWarm    = 10                     // streams opened and closed before the idle RSS is read
	heldSettle  = time.Second            // after the last stream opened, before RSS is sampled
	heldSample  = 2 * time.Second        // RSS is sampled this long and the peak kept
	heldTick    = 250 * time.Millisecond // between RSS samples
	heldOpenMax = 30 * time.Second       // one stream's dial, request, head and first event
)

// heldKeys are the rows the scenario covers (by -only key): nginx as the yardstick, Portkey as
// the peer gateway, and every relay row. HAProxy's config caps it at 8192 connections
// (maxconn); Caddy has no goal here.
var heldKeys = []string{"nginx", "portkey", "static", "static-lean", "circuit", "worker"}

// HeldResult is one row's figures.
type HeldResult struct {
	Row      string
	Skipped  string
	Asked    int
	Held     int           // streams open when the RSS was sampled and still open after
	Failed   int           // streams that did not open or closed early
	FirstErr string        // why the first failed stream failed
	Idle     int64         // RSS just before the streams, bytes, summed over the row's processes
	Loaded   int64         // peak RSS while they were held
	OpenTime time.Duration // opening all of them
}

// PerStream is the memory one held stream costs the row, in bytes.
func (h HeldResult) PerStream() float64 {
	if h.Held == 0 {
		return 0
	}
	return float64(h.Loaded-h.Idle) / float64(h.Held)
}

// heldFDMargin is what a row's process needs in descriptors besides its streams: listeners,
// logs, epoll, the control plane's connections, a few pooled ones.
const heldFDMargin = 100

// heldPlan is how many streams each row holds, and under which descriptor limit.
type heldPlan struct {
	n       int    // streams per row
	fdLimit uint64 // RLIMIT_NOFILE every row's processes start with
	note    string // why n is less than -held asked, when it is
}

// measureHeld runs the scenario on every selected row it covers, one row at a time; nil when
// none of them was selected.
func (b *Bench) measureHeld(rows []rowSpec, asked int) ([]HeldResult, string) {
	var covered []rowSpec
	for _, r := range rows {
		if slices.Contains(heldKeys, r.key) {
			covered = append(covered, r)
		}
	}
	if len(covered) == 0 {
		return nil, ""
	}
	plan, planErr := planHeld(asked)
	if plan.note != "" {
		b.logf("held streams: %s", plan.note)
	}
	var out []HeldResult
	for _, spec := range covered {
		if b.ctx.Err() != nil {
			break
		}
		res := HeldResult{Row: spec.row, Asked: plan.n}
		if planErr != nil {
			res.Skipped = oneLine(planErr)
		} else {
			b.logf("held streams: %s, %d streams", spec.row, plan.n)
			res = b.heldOne(spec, plan)
		}
		if b.ctx.Err() != nil {
			break // interrupted: the figures are partial
		}
		if res.Skipped != "" {
			b.logf("held streams: %s: skipped: %s", spec.row, res.Skipped)
		} else {
			b.logf("held streams: %s: %d held (opened in %s), %.1f KB per stream", spec.row, res.Held,
				res.OpenTime.Round(time.Millisecond), res.PerStream()/1024)
		}
		out = append(out, res)
	}
	return out, plan.note
}

// planHeld fits the streams to the machine, and raises the descriptor limit the rows started
// from here on inherit. Each stream is two descriptors in one process (the client and the
// upstream side of an nginx worker, of the relay server), so the limit caps the streams at
// about half of it; and each destination address gets n connections from 127.0.0.1, so n must
// fit the ephemeral port range.
func planHeld(asked int) (heldPlan, error) {
	plan := heldPlan{n: asked}
	limit, err := raiseFileLimit(uint64(2*asked + heldFDMargin))
	if err != nil {
		return plan, err
	}
	plan.fdLimit = limit
	if fit := (int(limit) - heldFDMargin) / 2; fit < asked {
		plan.n = max(0, fit)
		plan.note = fmt.Sprintf("%d streams per row, not the %d asked: RLIMIT_NOFILE's hard limit here is %d "+
			"and cannot be raised, and a held stream is two descriptors in one process", plan.n, asked, limit)
	}
	if plan.n < 1 {
		return plan, fmt.Errorf("RLIMIT_NOFILE %d leaves no room for held streams", limit)
	}
	if ports, err := ephemeralPorts(); err == nil && plan.n+1024 > ports {
		return plan, fmt.Errorf("%d streams: net.ipv4.ip_local_port_range has %d ports, need %d", plan.n, ports, plan.n+1024)
	}
	return plan, nil
}

// heldOne measures one row: start it fresh, warm it, read its idle RSS, open the streams, read
// its peak RSS while they are held, check they are still open, close them, stop the row.
func (b *Bench) heldOne(spec rowSpec, plan heldPlan) HeldResult {
	n := plan.n
	res := HeldResult{Row: spec.row, Asked: n}
	t, stop, err := b.startHeldRow(spec.key, plan)
	if err != nil {
		res.Skipped = oneLine(err)
		return res
	}
	defer stop()
	// Warm the held path (code pages, pools, the first goroutines) so the idle figure is a
	// process that has served such streams before, not one that never has.
	for range 20 {
		oneCompletion(b.ctx, t)
	}
	warm, _, _ := openHeld(b.ctx, t, heldWarm)
	closeAll(warm)
	if !pause(b.ctx, 500*time.Millisecond) {
		return res
	}
	res.Idle = CurrentRSS(t.PIDs)

	start := time.Now()
	conns, failed, firstErr := openHeld(b.ctx, t, n)
	defer closeAll(conns)
	res.OpenTime = time.Since(start)
	if firstErr != nil {
		res.FirstErr = oneLine(firstErr)
	}
	if len(conns) == 0 {
		res.Skipped = fmt.Sprintf("no stream opened (%s)", res.FirstErr)
		return res
	}
	if !pause(b.ctx, heldSettle) {
		return res
	}
	for end := time.Now().Add(heldSample); time.Now().Before(end); {
		res.Loaded = max(res.Loaded, CurrentRSS(t.PIDs))
		if !pause(b.ctx, heldTick) {
			return res
		}
	}
	for _, c := range conns {
		if stillOpen(c) {
			res.Held++
		}
	}
	res.Failed = failed + len(conns) - res.Held
	if res.Held == 0 {
		res.Skipped = "every stream was closed by the proxy while held"
	}
	return res
}

// openHeld opens n held streams through t, heldOpeners at a time, and returns the ones whose
// head and first event arrived; the others are counted in failed and the first error kept.
func openHeld(ctx context.Context, t Target, n int) (conns []net.Conn, failed int, firstErr error) {
	addr, host := t.Addr, cmp.Or(t.Host, t.Addr)
	req := fmt.Appendf(nil, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n", completionPath, host)
	for name, values := range t.Header {
		for _, v := range values {
			req = fmt.Appendf(req, "%s: %s\r\n", name, v)
		}
	}
	req = fmt.Appendf(req, "Content-Length: %d\r\n\r\n%s", len(holdRequest), holdRequest)
	var (
		mu   sync.Mutex
		next atomic.Int64
		wg   sync.WaitGroup
	)
	conns = make([]net.Conn, 0, n)
	for range min(heldOpeners, n) {
		wg.Go(func() {
			buf := make([]byte, 4096)
			for ctx.Err() == nil && next.Add(1) <= int64(n) {
				c, err := openOneHeld(ctx, addr, req, buf)
				mu.Lock()
				if err != nil {
					failed++
					if firstErr == nil {
						firstErr = err
					}
				} else {
					conns = append(conns, c)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return conns, failed, firstErr
}

var (
	okStatus  = []byte("HTTP/1.1 200 ")
	headerEnd = []byte("\r\n\r\n")
)

// openOneHeld sends one held-stream request on a new connection and reads until the head and
// the first event have come; buf is the opener's scratch space. It speaks HTTP/1.1 by hand
// because the connection is then kept without a goroutine or a buffer of ours behind it.
func openOneHeld(ctx context.Context, addr string, req, buf []byte) (net.Conn, error) {
	d := net.Dialer{Timeout: 10 * time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	// An interrupt must not wait out the deadline.
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	fail := func(err error) (net.Conn, error) { c.Close(); return nil, err }
	c.SetDeadline(time.Now().Add(heldOpenMax))
	if _, err := c.Write(req); err != nil {
		return fail(fmt.Errorf("send request: %w", err))
	}
	got := 0
	for {
		k, err := c.Read(buf[got:])
		got += k
		seen := buf[:got]
		if i := bytes.Index(seen, headerEnd); i >= 0 {
			if !bytes.HasPrefix(seen, okStatus) {
				line, _, _ := bytes.Cut(seen, []byte("\r\n"))
				return fail(fmt.Errorf("answered %q", line))
			}
			if bytes.Contains(seen[i:], dataPrefix) {
				c.SetDeadline(time.Time{})
				return c, nil
			}
		}
		if err != nil {
			return fail(fmt.Errorf("read head and first event: %w", err))
		}
		if got == len(buf) {
			return fail(errors.New("head and first event longer than 4 KB"))
		}
	}
}

// stillOpen peeks at c without blocking: nothing to read means open, end of stream or an error
// means the proxy closed it.
func stillOpen(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	open := false
	var b [1]byte
	raw.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		open = n > 0 || errors.Is(err, syscall.EAGAIN)
		return true
	})
	return open
}

func closeAll(conns []net.Conn) {
	for _, c := range conns {
		c.Close()
	}
}

// pause waits d; false when ctx ended first.
func pause(ctx context.Context, d time.Duration) bool {
	return sleepUntil(ctx, time.Now().Add(d)) == nil
}
