package pgtest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// settings go into postgresql.conf: loopback TCP only (no socket file to collide on), and
// durability off, since a test cluster is thrown away.
const settings = `
# pgtest
listen_addresses = '127.0.0.1'
unix_socket_directories = ''
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 200
`

// errPortTaken means another process took the port between our probe and the server's bind.
var errPortTaken = errors.New("port taken")

// server is one initialised data directory and the postgres process serving it.
type server struct {
	bin  binaries
	user *serverUser
	dir  string // ours, owned by user; holds data and the log
	data string
	log  string
	port int

	mu      sync.Mutex
	running bool

	watchdog *exec.Cmd // removes the cluster if the test binary dies first
	release  io.Closer // closing it sets the watchdog off
}

// startServer creates a cluster in a new temporary directory and starts it on a free port.
func startServer() (*server, error) {
	bin, err := findBinaries()
	if err != nil {
		return nil, err
	}
	u, err := lookupServerUser()
	if err != nil {
		return nil, err
	}
	// Not t.TempDir: its parents are private to root, and the server runs as another user.
	dir, err := os.MkdirTemp("", "modelrelay-pg-")
	if err != nil {
		return nil, fmt.Errorf("temporary directory: %w", err)
	}
	s := &server{bin: bin, user: u, dir: dir, data: filepath.Join(dir, "data"), log: filepath.Join(dir, "server.log")}
	if err := s.init(); err != nil {
		s.remove()
		return nil, err
	}
	for range 5 {
		var port int
		if port, err = freePort(); err != nil {
			break
		}
		if err = s.run(port); !errors.Is(err, errPortTaken) {
			break
		}
	}
	if err != nil {
		s.remove()
		return nil, err
	}
	return s, nil
}

// init runs initdb (superuser postgres, trusted, no fsync) and appends our settings.
func (s *server) init() error {
	if err := s.user.chown(s.dir); err != nil {
		return fmt.Errorf("give %s to user %s: %w", s.dir, s.user.name, err)
	}
	if err := s.checkReachable(s.dir); err != nil {
		return err
	}
	if err := s.startWatchdog(); err != nil {
		return err
	}
	cmd := s.user.command(s.dir, s.bin.initdb, "-D", s.data, "-U", "postgres", "--auth=trust",
		"--encoding=UTF8", "--locale=C", "--no-sync")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s failed: %v\n%s", s.bin.initdb, err, tail(out))
	}
	f, err := os.OpenFile(filepath.Join(s.data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("configure the cluster: %w", err)
	}
	_, err = f.WriteString(settings)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("configure the cluster: %w", err)
	}
	return nil
}

// run starts the server on port and waits until it accepts connections (at most 30 s).
func (s *server) run(port int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running {
		return nil
	}
	logStart := fileSize(s.log)
	cmd := s.user.command(s.dir, s.bin.pgCtl, "start", "-w", "-t", "30", "-D", s.data, "-l", s.log,
		"-p", s.bin.postgres, "-o", "-p "+strconv.Itoa(port))
	out, err := cmd.CombinedOutput()
	if err != nil {
		log := readFrom(s.log, logStart)
		if bytes.Contains(log, []byte("Address already in use")) || bytes.Contains(log, []byte("could not bind")) {
			return fmt.Errorf("%w: %d", errPortTaken, port)
		}
		return fmt.Errorf("pg_ctl start on 127.0.0.1:%d failed: %v\n%s%s", port, err, tail(out), s.logTail())
	}
	s.port, s.running = port, true
	return nil
}

// stop shuts the server down with pg_ctl's mode (fast: roll back and disconnect clients).
func (s *server) stop(mode string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running {
		return nil
	}
	cmd := s.user.command(s.dir, s.bin.pgCtl, "stop", "-w", "-t", "30", "-m", mode, "-D", s.data)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pg_ctl stop -m %s on port %d failed: %v\n%s%s", mode, s.port, err, tail(out), s.logTail())
	}
	s.running = false
	return nil
}

// remove stops the server and deletes its directory.
func (s *server) remove() error {
	err := s.stop("fast")
	if err != nil {
		err = errors.Join(err, s.stop("immediate"))
	}
	s.stopWatchdog()
	if rerr := os.RemoveAll(s.dir); rerr != nil {
		err = errors.Join(err, rerr)
	}
	return err
}

// logTail is the end of the server log, for failure messages.
func (s *server) logTail() string {
	b := readFrom(s.log, 0)
	if len(b) == 0 {
		return ""
	}
	return "\nserver log " + s.log + " (end):\n" + tail(b)
}

// tail returns the last lines of b, at most 2 kB.
func tail(b []byte) string {
	const max = 2048
	if len(b) > max {
		b = b[len(b)-max:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return strings.TrimRight(string(b), "\n")
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// readFrom returns what path holds from offset on (nothing when it cannot be read).
func readFrom(path string, offset int64) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil
	}
	b, _ := io.ReadAll(f)
	return b
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
