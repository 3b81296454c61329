package pgtest

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// watchdogScript waits for its standard input to close, which happens when the test binary
// ends in any way (a panic, a test timeout, a kill), then stops the cluster and deletes its
// directory: a crashed test run leaves no server behind. After a normal end it finds nothing
// to do.
const watchdogScript = `cat >/dev/null; "$1" stop -D "$2" -m immediate -w -t 30 >/dev/null 2>&1; rm -rf "$3"`

// startWatchdog starts the watchdog as the server's user (pg_ctl refuses root), in a process
// group of its own so a Ctrl-C that kills the test binary does not kill it too.
func (s *server) startWatchdog() error {
	cmd := s.user.command(s.dir, "/bin/sh", "-c", watchdogScript, "pgtest-watchdog", s.bin.pgCtl, s.data, s.dir)
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return fmt.Errorf("watchdog: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("watchdog: %w", err)
	}
	s.watchdog, s.release = cmd, stdin
	return nil
}

// stopWatchdog lets the watchdog run its (by now empty) cleanup and waits for it, at most 30 s.
func (s *server) stopWatchdog() {
	if s.watchdog == nil {
		return
	}
	s.release.Close()
	done := make(chan struct{})
	go func() {
		_ = s.watchdog.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = s.watchdog.Process.Kill()
		<-done
	}
	s.watchdog = nil
}

// checkReachable fails early, and clearly, when the server's user cannot reach dir (a TMPDIR
// under /root, say), which initdb would report far less plainly.
func (s *server) checkReachable(dir string) error {
	if s.user == nil {
		return nil
	}
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if ok && fi.Mode().Perm()&0o001 == 0 && st.Uid != s.user.uid {
			return fmt.Errorf("user %s cannot enter %s, a parent of %s: point TMPDIR elsewhere (e.g. /tmp)", s.user.name, d, dir)
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}
