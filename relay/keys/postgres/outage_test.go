package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"modelrelay/relay/keys"
	"modelrelay/relay/keys/pgtest"
)

// TestDatabaseDown stops the server under an open store: calls fail fast with
// keys.ErrUnavailable, and once the server is back the same store works again.
func TestDatabaseDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := pgtest.Start(t)
	s := open(t, c.NewDatabase(t))
	k, secret := insert(t, s, "survivor")
	row := []keys.Usage{{KeyID: k.ID, Day: time.Now(), Model: "m", Requests: 1, InputTokens: 2, OutputTokens: 3}}
	used := map[string]time.Time{k.ID: time.Now()}
	if err := s.Record(ctx, row, used); err != nil {
		t.Fatalf("Record: %v", err)
	}

	c.Stop(t)
	for name, call := range map[string]func() error{
		"Find":   func() error { _, _, err := s.Find(ctx, keys.HashOf(secret)); return err },
		"Record": func() error { return s.Record(ctx, row, used) },
		"List":   func() error { _, err := s.List(ctx); return err },
		"Get":    func() error { _, _, err := s.Get(ctx, k.ID); return err },
	} {
		start := time.Now()
		err := call()
		if !errors.Is(err, keys.ErrUnavailable) {
			t.Errorf("%s with the database down: %v; want keys.ErrUnavailable", name, err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%s with the database down took %v", name, d)
		}
	}

	c.Restart(t)
	// Connections the pool held died with the server; within a few calls it has new ones.
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, ok, err := s.Find(ctx, keys.HashOf(secret))
		if err == nil && ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Find after the restart: %v, %v", ok, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := s.Record(ctx, row, used); err != nil {
		t.Fatalf("Record after the restart: %v", err)
	}
	u, err := s.Usage(ctx, k.ID)
	if err != nil || len(u) != 1 || u[0].Requests != 2 || u[0].OutputTokens != 6 {
		t.Errorf("Usage after the restart = %+v, %v; want both Records counted once", u, err)
	}
}
