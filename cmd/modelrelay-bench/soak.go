package main

// `modelrelay-bench soak`: what slow and oversized request bodies cost the relay. It starts
// the fake upstream and the relay (static backend), then holds, phase by phase, connections
// that a careless server pays for in memory, and reports the relay's RSS and the latency of an
// ordinary request during each phase. Not part of `make test`: it takes about a minute.

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// soakPhase is one kind of abuse held for a while.
type soakPhase struct {
	name  string
	conns int
	// open starts one connection's abuse on c; it returns when done or when stop closes.
	open func(c net.Conn, addr string, stop <-chan struct{})
}

var soakPhases = []soakPhase{
	{"20 bodies of 16 MiB minus the last byte", 20, func(c net.Conn, addr string, stop <-chan struct{}) {
		io.WriteString(c, soakHead(addr, 16<<20))
		chunk := strings.Repeat("x", 64<<10)
		for sent := 0; sent < 16<<20-len(chunk); sent += len(chunk) {
			if _, err := io.WriteString(c, chunk); err != nil {
				return
			}
		}
		io.WriteString(c, chunk[:len(chunk)-1])
		<-stop
	}},
	{"500 bodies announcing 1 MiB, nothing sent", 500, func(c net.Conn, addr string, stop <-chan struct{}) {
		io.WriteString(c, soakHead(addr, 1<<20))
		<-stop
	}},
	{"500 bodies trickling 512 B/200 ms", 500, func(c net.Conn, addr string, stop <-chan struct{}) {
		io.WriteString(c, soakHead(addr, 1<<20)+`{"model":"bench","pad":"`)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := io.WriteString(c, strings.Repeat("s", 512)); err != nil {
					return
				}
			}
		}
	}},
	{"1,000 idle connections", 1000, func(c net.Conn, addr string, stop <-chan struct{}) { <-stop }},
}

func soakHead(addr string, length int) string {
	return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", completionPath, addr, length)
}

func soakMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("modelrelay-bench soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	hold := fs.Duration("hold", 10*time.Second, "how long each phase holds its connections")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := runSoak(ctx, *hold, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "modelrelay-bench soak:", err)
		return 1
	}
	return 0
}

func runSoak(ctx context.Context, hold time.Duration, stdout, stderr io.Writer) error {
	b, done, err := newToolBench(ctx, "soak", stderr)
	if err != nil {
		return err
	}
	defer done()
	if err := b.startUpstream(); err != nil {
		return err
	}
	relay, err := b.startRelayStatic(relayStatic, false)
	if err != nil {
		return err
	}
	pid := relay.PIDs[0]
	for range 100 {
		oneCompletion(ctx, relay)
	}
	idle := currentRSS(pid)
	fmt.Fprintf(stdout, "| phase | relay RSS | over idle | request p50 | request p99 | failed |\n|---|---|---|---|---|---|\n")
	fmt.Fprintf(stdout, "| idle | %d MiB | | | | |\n", idle>>20)
	for _, ph := range soakPhases {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		b.logf("phase: %s", ph.name)
		peak, p50, p99, failed := soakOne(ctx, relay.Addr, pid, ph, hold)
		fmt.Fprintf(stdout, "| %s | %d MiB | +%d MiB | %s | %s | %d |\n", ph.name, peak>>20, (peak-idle)>>20,
			p50.Round(10*time.Microsecond), p99.Round(10*time.Microsecond), failed)
	}
	return nil
}

// soakOne holds ph's connections for hold while ordinary completions run beside them.
func soakOne(ctx context.Context, addr string, pid int, ph soakPhase, hold time.Duration) (peak int64, p50, p99 time.Duration, failed int) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var conns []net.Conn
	for range ph.conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			break
		}
		conns = append(conns, c)
		wg.Go(func() { ph.open(c, addr, stop) })
	}
	var lat []time.Duration
	end := time.Now().Add(hold)
	for time.Now().Before(end) && ctx.Err() == nil {
		start := time.Now()
		if oneCompletion(ctx, Target{Addr: addr}) != nil {
			failed++
		}
		lat = append(lat, time.Since(start))
		peak = max(peak, currentRSS(pid))
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	for _, c := range conns {
		c.Close()
	}
	wg.Wait()
	slices.Sort(lat)
	if len(lat) > 0 {
		p50, p99 = lat[len(lat)/2], lat[len(lat)*99/100]
	}
	return peak, p50, p99, failed
}

// currentRSS is a process's resident set size now (VmRSS), 0 when unreadable.
func currentRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb int64
			fmt.Sscan(rest, &kb)
			return kb << 10
		}
	}
	return 0
}

// newToolBench is the setup of a tool run that measures the relay alone (soak, translation):
// a temp dir named for it, the children it starts, and a freshly built server. done stops the
// children and removes the dir.
func newToolBench(ctx context.Context, name string, stderr io.Writer) (b *Bench, done func(), err error) {
	logf := func(format string, args ...any) {
		fmt.Fprintf(stderr, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
	repoRoot, err := findRepoRoot()
	if err != nil {
		return nil, nil, err
	}
	tmp, err := os.MkdirTemp("", "modelrelay-"+name+"-")
	if err != nil {
		return nil, nil, fmt.Errorf("temp dir: %w", err)
	}
	children := NewChildren(tmp)
	done = func() {
		children.StopAll()
		os.RemoveAll(tmp)
	}
	b = &Bench{ctx: ctx, repoRoot: repoRoot, tmp: tmp, children: children, logf: logf}
	b.logf("building modelrelay-server")
	if b.bins, err = buildRelay(repoRoot, filepath.Join(tmp, "bin")); err != nil {
		done()
		return nil, nil, err
	}
	return b, done, nil
}
