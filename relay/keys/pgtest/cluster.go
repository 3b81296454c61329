// Package pgtest runs private PostgreSQL clusters for tests: each listens on a random loopback
// port of its own, lives in a temporary directory removed at the end, and never touches a
// PostgreSQL server already running on the machine. The server binaries come from the Debian
// package postgresql (`make deps`); a machine without them fails the test rather than skip it,
// so a missing install step cannot pass CI unnoticed.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Cluster is a running PostgreSQL cluster whose superuser postgres logs in without a password
// from 127.0.0.1.
type Cluster struct {
	*server
	shared bool // the test binary's Shared cluster: not for Stop or Restart
}

// Start starts a cluster for this test alone, stopped and removed when the test ends. Use it
// for tests that stop the server; others should use Shared, which pays initdb once.
func Start(t testing.TB) *Cluster {
	t.Helper()
	skipShort(t)
	s, err := startServer()
	if err != nil {
		t.Fatal("pgtest: " + err.Error())
	}
	c := &Cluster{server: s}
	t.Cleanup(func() {
		if err := c.remove(); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	return c
}

var (
	shared struct {
		once sync.Once
		c    *Cluster
		err  error
	}
	mainRuns atomic.Bool
)

// Shared returns the test binary's one cluster, started at its first use. Tests share it, so
// each should work in its own NewDatabase. The package's TestMain must call Main, which
// removes the cluster when the tests end.
func Shared(t testing.TB) *Cluster {
	t.Helper()
	skipShort(t)
	if !mainRuns.Load() {
		t.Fatal("pgtest: Shared needs `func TestMain(m *testing.M) { pgtest.Main(m) }` in the package, which removes the cluster at exit")
	}
	shared.once.Do(func() {
		s, err := startServer()
		if err != nil {
			shared.err = err
			return
		}
		shared.c = &Cluster{server: s, shared: true}
	})
	if shared.err != nil {
		t.Fatal("pgtest: " + shared.err.Error())
	}
	return shared.c
}

// skipShort skips the test under -short (`make check`): a test that needs a PostgreSQL server
// is not a unit test, and the machine may have no server binaries.
func skipShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("pgtest: needs a PostgreSQL server, which -short leaves out")
	}
}

// Main is the TestMain of a package that uses Shared: it runs the tests, stops and removes the
// shared cluster if one was started, and exits with the tests' code.
func Main(m *testing.M) {
	mainRuns.Store(true)
	code := m.Run()
	shared.once.Do(func() {}) // orders the reads below after the start; no start from here on
	if shared.c != nil {
		if err := shared.c.remove(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest:", err)
			if code == 0 {
				code = 1
			}
		}
	}
	os.Exit(code)
}

// Port is the loopback TCP port the cluster listens on.
func (c *Cluster) Port() int { return c.port }

// dbSeq numbers this process's databases, which makes their names unique in its clusters.
var dbSeq atomic.Int64

// NewDatabase creates an empty database for this test and returns its URL,
// postgres://postgres@127.0.0.1:PORT/NAME?sslmode=disable. It lives as long as the cluster.
func (c *Cluster) NewDatabase(t testing.TB) string {
	t.Helper()
	name := databaseName(dbSeq.Add(1), t.Name())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.url("postgres"))
	if err != nil {
		t.Fatalf("pgtest: connect to the cluster on port %d: %v%s", c.port, err, c.logTail())
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("pgtest: create database %s: %v%s", name, err, c.logTail())
	}
	return c.url(name)
}

// Stop shuts the server down (pg_ctl stop -m fast), as a database outage would; Restart brings
// it back on the same port with the same data. Only for a cluster from Start.
func (c *Cluster) Stop(t testing.TB) {
	t.Helper()
	if c.shared {
		t.Fatal("pgtest: Stop on the shared cluster would break other tests: use Start")
	}
	if err := c.stop("fast"); err != nil {
		t.Fatal("pgtest: " + err.Error())
	}
}

// Restart starts a stopped cluster again on its port and data directory.
func (c *Cluster) Restart(t testing.TB) {
	t.Helper()
	if c.shared {
		t.Fatal("pgtest: Restart on the shared cluster: use Start")
	}
	err := c.run(c.port)
	if errors.Is(err, errPortTaken) {
		// The old listening socket may linger for a moment after a stop.
		for i := 0; i < 20 && errors.Is(err, errPortTaken); i++ {
			time.Sleep(100 * time.Millisecond)
			err = c.run(c.port)
		}
	}
	if err != nil {
		t.Fatal("pgtest: " + err.Error())
	}
}

func (c *Cluster) url(db string) string {
	return "postgres://postgres@127.0.0.1:" + strconv.Itoa(c.port) + "/" + db + "?sslmode=disable"
}

// databaseName is "t<seq>_" and the test's name in lower-case letters, digits and underscores,
// within PostgreSQL's 63-byte identifiers, so a database can be traced back to its test.
func databaseName(seq int64, test string) string {
	var b strings.Builder
	b.WriteString("t" + strconv.FormatInt(seq, 10) + "_")
	for _, r := range strings.ToLower(test) {
		if b.Len() >= 63 {
			break
		}
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}
