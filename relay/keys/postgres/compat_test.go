package postgres_test

import (
	"context"
	"crypto/sha256"
	"testing"

	"modelrelay/relay/keys"
	"modelrelay/relay/keys/pgtest"
)

// TestRustDatabase opens a database the Rust server made and filled: its keys work (with no
// limits), and its table, indexes and sqlx's bookkeeping are left as they were.
func TestRustDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.Shared(t).NewDatabase(t)
	conn := connect(t, url)
	if _, err := conn.Exec(ctx, pgtest.RustSchema); err != nil {
		t.Fatalf("Rust schema: %v", err)
	}
	// A key as the Rust server inserts it: prefix = the secret's first 16 characters, hash =
	// SHA-256 of the secret.
	secret, _ := keys.NewSecret()
	id, hash := keys.NewID(), sha256.Sum256([]byte(secret))
	if _, err := conn.Exec(ctx, `INSERT INTO server_api_keys (id, name, prefix, hash) VALUES ($1, $2, $3, $4)`,
		id, "rust key", secret[:16], hash[:]); err != nil {
		t.Fatalf("insert a Rust key: %v", err)
	}
	before := pgtest.DescribeRustSchema(t, conn)

	s := open(t, url)
	k, ok, err := s.Find(ctx, keys.HashOf(secret))
	if err != nil || !ok {
		t.Fatalf("Find of the Rust key = %v, %v", ok, err)
	}
	if k.ID != id || k.Name != "rust key" || k.Prefix != secret[:16] || k.CreatedAt.IsZero() || !k.RevokedAt.IsZero() ||
		!k.LastUsedAt.IsZero() {
		t.Errorf("Find of the Rust key: %+v", k)
	}
	if len(k.AllowedModels) != 0 || k.RateLimitRPM != 0 || k.TokenLimitTPM != 0 || k.Priority != "" || k.MaxPriority != "" || k.Cache != "" ||
		!k.ExpiresAt.IsZero() {
		t.Errorf("Rust key has limits: %+v", k.Limits)
	}
	mine, _ := insert(t, s, "go key")
	ks, err := s.List(ctx)
	if err != nil || len(ks) != 2 || ks[0].ID != mine.ID || ks[1].ID != id {
		t.Fatalf("List = %+v, %v; want the Go key, then the Rust key", ks, err)
	}
	if ok, err := s.Revoke(ctx, id); err != nil || !ok {
		t.Fatalf("Revoke of the Rust key = %v, %v", ok, err)
	}
	if _, ok, err := s.Find(ctx, keys.HashOf(secret)); err != nil || ok {
		t.Errorf("Find of the revoked Rust key = %v, %v; want not found", ok, err)
	}
	ks, err = s.List(ctx)
	if err != nil || len(ks) != 2 || ks[1].RevokedAt.IsZero() {
		t.Errorf("List after the revoke = %+v, %v; want the Rust key revoked", ks, err)
	}
	// What the Rust server reads of the revoke: its own column.
	var revoked bool
	if err := conn.QueryRow(ctx, `SELECT revoked_at IS NOT NULL FROM server_api_keys WHERE id = $1`, id).Scan(&revoked); err != nil || !revoked {
		t.Errorf("revoked_at of the Rust key set = %v, %v", revoked, err)
	}
	if after := pgtest.DescribeRustSchema(t, conn); after != before {
		t.Errorf("the Rust server's schema changed:\nbefore %s\nafter  %s", before, after)
	}
}
