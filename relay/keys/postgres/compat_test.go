package postgres_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"modelrelay/relay/keys"
	"modelrelay/relay/keys/pgtest"
)

// rustSchema is what the Rust ModelRelay server's sqlx migration creates, byte for byte, and
// the bookkeeping table sqlx keeps beside it.
const rustSchema = `
CREATE TABLE IF NOT EXISTS _sqlx_migrations (
    version BIGINT PRIMARY KEY,
    description TEXT NOT NULL,
    installed_on TIMESTAMPTZ NOT NULL DEFAULT now(),
    success BOOLEAN NOT NULL,
    checksum BYTEA NOT NULL,
    execution_time BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS server_api_keys (id UUID PRIMARY KEY, name TEXT NOT NULL, prefix TEXT NOT NULL, hash BYTEA NOT NULL, created_at TIMESTAMPTZ NOT NULL DEFAULT now(), last_used_at TIMESTAMPTZ, revoked_at TIMESTAMPTZ);
CREATE INDEX IF NOT EXISTS idx_server_api_keys_prefix ON server_api_keys(prefix) WHERE revoked_at IS NULL;
CREATE INDEX IF NOT EXISTS idx_server_api_keys_hash ON server_api_keys(hash) WHERE revoked_at IS NULL;
INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time)
VALUES (20240101000000, 'server api keys', true, sha384('server api keys'::bytea), 1234567);
`

// TestRustDatabase opens a database the Rust server made and filled: its keys work (with no
// limits), and its table, indexes and sqlx's bookkeeping are left as they were.
func TestRustDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.Shared(t).NewDatabase(t)
	conn := connect(t, url)
	if _, err := conn.Exec(ctx, rustSchema); err != nil {
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
	before := schemaOf(t, conn)

	s := open(t, url)
	k, ok, err := s.Find(ctx, keys.HashOf(secret))
	if err != nil || !ok {
		t.Fatalf("Find of the Rust key = %v, %v", ok, err)
	}
	if k.ID != id || k.Name != "rust key" || k.Prefix != secret[:16] || k.CreatedAt.IsZero() || !k.RevokedAt.IsZero() ||
		!k.LastUsedAt.IsZero() {
		t.Errorf("Find of the Rust key: %+v", k)
	}
	if len(k.AllowedModels) != 0 || k.RateLimitRPM != 0 || k.TokenLimitTPM != 0 || k.Priority != "" || !k.ExpiresAt.IsZero() {
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
	if after := schemaOf(t, conn); after != before {
		t.Errorf("the Rust server's schema changed:\nbefore %s\nafter  %s", before, after)
	}
}

// schemaOf describes server_api_keys (columns, indexes) and the rows of _sqlx_migrations.
func schemaOf(t *testing.T, conn *pgx.Conn) string {
	t.Helper()
	var out string
	for _, q := range []string{
		`SELECT ordinal_position, column_name, data_type, is_nullable, coalesce(column_default, '')
		 FROM information_schema.columns WHERE table_name = 'server_api_keys' ORDER BY ordinal_position`,
		`SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'server_api_keys' ORDER BY indexname`,
		`SELECT version, description, installed_on, success, checksum, execution_time FROM _sqlx_migrations ORDER BY version`,
	} {
		rows, err := conn.Query(context.Background(), q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				t.Fatal(err)
			}
			out += fmt.Sprint(vals) + "; "
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}
