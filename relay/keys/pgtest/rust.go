package pgtest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// RustSchema is what the Rust ModelRelay server's sqlx migration makes of a database (its
// table and two indexes, as the Rust source has them) and the bookkeeping table sqlx keeps
// beside it, with the migration's row: tests start from it to show that a Rust deployment's
// database works unchanged.
const RustSchema = `
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
VALUES (20260405120000, 'create server api keys', true, sha384('create server api keys'::bytea), 2345678);
`

// DescribeRustSchema describes what the Rust server owns in the database (server_api_keys'
// columns and indexes, sqlx's rows), so a test can compare it before and after our migrations.
func DescribeRustSchema(t testing.TB, conn *pgx.Conn) string {
	t.Helper()
	var out strings.Builder
	for _, q := range []string{
		`SELECT ordinal_position, column_name, data_type, is_nullable, coalesce(column_default, ''), coalesce(character_maximum_length, 0)
		 FROM information_schema.columns WHERE table_schema = 'public' AND table_name = 'server_api_keys' ORDER BY ordinal_position`,
		`SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' AND tablename = 'server_api_keys' ORDER BY indexname`,
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
			fmt.Fprintf(&out, "%v\n", vals)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out.String()
}
