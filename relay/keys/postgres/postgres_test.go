package postgres_test

import (
	"context"
	"encoding/hex"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"modelrelay/relay/keys"
	"modelrelay/relay/keys/pgtest"
	"modelrelay/relay/keys/postgres"
	"modelrelay/relay/keys/storetest"
)

// TestStore holds the PostgreSQL store to the keys.Store contract, each subtest in a fresh
// database of the shared cluster.
func TestStore(t *testing.T) {
	t.Parallel()
	c := pgtest.Shared(t)
	storetest.Run(t, func(t *testing.T) keys.Store { return open(t, c.NewDatabase(t)) })
}

// open opens a store on url, closed when the test ends.
func open(t *testing.T, url string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), url, postgres.Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// connect is a plain connection for looking at what the store wrote.
func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func TestMigrationsIdempotent(t *testing.T) {
	t.Parallel()
	url := pgtest.Shared(t).NewDatabase(t)
	open(t, url).Close()
	s := open(t, url) // finds everything applied
	k, _ := insert(t, s, "after reopen")
	if _, ok, err := s.Get(context.Background(), k.ID); err != nil || !ok {
		t.Fatalf("Get after a second Open = %v, %v", ok, err)
	}
	var versions []int32
	rows, err := connect(t, url).Query(context.Background(), "SELECT version FROM modelrelay_schema_migrations ORDER BY version")
	if err == nil {
		versions, err = pgx.CollectRows(rows, pgx.RowTo[int32])
	}
	if err != nil || !slices.Equal(versions, []int32{1, 2, 3, 4}) {
		t.Errorf("applied migrations = %v, %v; want [1 2 3 4]", versions, err)
	}
}

// TestUpgradeAddsMaxPriority opens a database that an earlier relay migrated (versions 1 and
// 2, a key with limits in it): the new column arrives, the key keeps its limits and gains no
// ceiling, and the ceiling can then be set.
func TestUpgradeAddsMaxPriority(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.Shared(t).NewDatabase(t)
	conn := connect(t, url)
	for _, name := range []string{"0001_server_api_keys.sql", "0002_modelrelay_limits_usage.sql"} {
		sql, err := os.ReadFile("migrations/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, string(sql)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	secret, prefix := keys.NewSecret()
	id, hash := keys.NewID(), keys.HashOf(secret)
	for _, sql := range []string{
		`CREATE TABLE modelrelay_schema_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`,
		`INSERT INTO modelrelay_schema_migrations (version) VALUES (1), (2)`,
		`INSERT INTO server_api_keys (id, name, prefix, hash) VALUES ('` + id + `', 'old', '` + prefix + `', '\x` + hex.EncodeToString(hash[:]) + `')`,
		`INSERT INTO modelrelay_key_limits (key_id, rate_limit_rpm, priority) VALUES ('` + id + `', 7, 'low')`,
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	s := open(t, url)
	k, ok, err := s.Find(ctx, hash)
	if err != nil || !ok {
		t.Fatalf("Find of the key made before the upgrade = %v, %v", ok, err)
	}
	if k.RateLimitRPM != 7 || k.Priority != "low" || k.MaxPriority != "" {
		t.Errorf("limits after the upgrade = %+v; want rpm 7, priority low, no max priority", k.Limits)
	}
	ceiling := "normal"
	if k, ok, err = s.Update(ctx, id, keys.Patch{MaxPriority: &ceiling}); err != nil || !ok || k.MaxPriority != "normal" ||
		k.RateLimitRPM != 7 || k.Priority != "low" {
		t.Errorf("Update of the max priority = %+v, %v, %v", k.Limits, ok, err)
	}
}

// TestConcurrentOpen opens a fresh database from several goroutines at once, as replicas of
// the relay starting together do: the advisory lock makes them migrate one after the other.
func TestConcurrentOpen(t *testing.T) {
	t.Parallel()
	url := pgtest.Shared(t).NewDatabase(t)
	const n = 4
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := postgres.Open(context.Background(), url, postgres.Options{Timeout: 10 * time.Second})
			if err == nil {
				s.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Open %d: %v", i, err)
		}
	}
}

func insert(t *testing.T, s keys.Store, name string) (keys.Key, string) {
	t.Helper()
	secret, prefix := keys.NewSecret()
	k, err := s.Insert(context.Background(), keys.Key{ID: keys.NewID(), Name: name, Prefix: prefix}, keys.HashOf(secret))
	if err != nil {
		t.Fatalf("Insert: %v", err)
	}
	return k, secret
}

// TestOpenErrorHidesPassword: Open's errors name the database but never its password, even
// for a URL pgx cannot parse.
func TestOpenErrorHidesPassword(t *testing.T) {
	t.Parallel()
	for _, url := range []string{
		"postgres://postgres:hunter2@127.0.0.1:1/x",
		"postgres://postgres:hunter2@127.0.0.1:1/x?sslmode=disable&connect_timeout=1",
		"postgres://postgres@127.0.0.1:1/x?password=hunter2",
		"postgres://postgres:hunter2@127.0.0.1:notaport/x",
		"postgres://postgres@127.0.0.1:notaport/x?password=hunter2",
		"postgres://postgres:hunter2@127.0.0.1:1/x?sslmode=bogus",
		"host=127.0.0.1 port=1 user=postgres password=hunter2 dbname=x",
		"host=127.0.0.1 port=nope user=postgres password='hunter2' dbname=x",
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		s, err := postgres.Open(ctx, url, postgres.Options{})
		cancel()
		if err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded", url)
			continue
		}
		msg := err.Error()
		if strings.Contains(msg, "hunter2") || strings.Contains(msg, "\n") {
			t.Errorf("Open error shows the password or is not one line: %q", msg)
		}
		t.Logf("%s", msg)
	}
}
