package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Children owns every process the benchmark starts, so that one call at exit (or on Ctrl-C)
// stops them all. Each child gets its own process group: nginx's workers and the relay's
// worker daemon go down with their parent.
type Children struct {
	mu    sync.Mutex
	procs []*exec.Cmd
	dir   string // logs of every child land here
}

func NewChildren(dir string) *Children { return &Children{dir: dir} }

// Start runs name with args, its stdout and stderr going to <dir>/<label>.log. A label used
// again (a row restarted for the held-streams scenario) appends to the same log.
func (c *Children) Start(label string, env []string, name string, args ...string) (*exec.Cmd, error) {
	logFile, err := os.OpenFile(filepath.Join(c.dir, label+".log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("log file for %s: %w", label, err)
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), env...)
	// Pdeathsig: if the benchmark itself dies hard, the kernel still takes its children down.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", label, err)
	}
	logFile.Close() // the child holds its own descriptor
	c.mu.Lock()
	c.procs = append(c.procs, cmd)
	c.mu.Unlock()
	return cmd, nil
}

// Stop ends one child's process group: SIGTERM, then SIGKILL after a grace period.
func (c *Children) Stop(cmd *exec.Cmd) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	pgid := cmd.Process.Pid
	syscall.Kill(-pgid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		syscall.Kill(-pgid, syscall.SIGKILL)
		<-done
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, p := range c.procs {
		if p == cmd {
			c.procs = append(c.procs[:i], c.procs[i+1:]...)
			break
		}
	}
}

// StopAll stops every child still running, newest first.
func (c *Children) StopAll() {
	for {
		c.mu.Lock()
		n := len(c.procs)
		var last *exec.Cmd
		if n > 0 {
			last = c.procs[n-1]
		}
		c.mu.Unlock()
		if last == nil {
			return
		}
		c.Stop(last)
	}
}

// FreePort returns a loopback address nobody listens on right now. Another process could take
// it before the child binds; on a benchmark machine that race is rare enough.
func FreePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// WaitHTTP polls url until it answers wantStatus (any status when 0), or the deadline passes.
func WaitHTTP(ctx context.Context, url, host string, wantStatus int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	var lastErr error
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if host != "" {
			req.Host = host
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if wantStatus == 0 || resp.StatusCode == wantStatus {
				return nil
			}
			lastErr = fmt.Errorf("status %d", resp.StatusCode)
		} else {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s: %w", url, lastErr)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
