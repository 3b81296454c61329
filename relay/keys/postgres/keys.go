package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"modelrelay/relay/keys"
)

// selectKey reads keys with their limits; a key without a limits row (every key the Rust
// server made) has none.
const selectKey = `SELECT k.id::text, k.name, k.prefix, k.created_at, k.last_used_at, k.revoked_at,
	l.allowed_models, COALESCE(l.rate_limit_rpm, 0), COALESCE(l.token_limit_tpm, 0),
	COALESCE(l.priority, ''), COALESCE(l.max_priority, ''), l.expires_at, COALESCE(l.cache, '')
FROM server_api_keys k LEFT JOIN modelrelay_key_limits l ON l.key_id = k.id`

// scanKey reads one row of selectKey; NULL times become zero times, all times UTC.
func scanKey(row pgx.Row) (keys.Key, error) {
	var (
		k                          keys.Key
		lastUsed, revoked, expires *time.Time
		rpm, tpm                   int32
	)
	err := row.Scan(&k.ID, &k.Name, &k.Prefix, &k.CreatedAt, &lastUsed, &revoked,
		&k.AllowedModels, &rpm, &tpm, &k.Priority, &k.MaxPriority, &expires, &k.Cache)
	if err != nil {
		return keys.Key{}, err
	}
	k.CreatedAt = k.CreatedAt.UTC()
	k.LastUsedAt, k.RevokedAt, k.ExpiresAt = utc(lastUsed), utc(revoked), utc(expires)
	k.RateLimitRPM, k.TokenLimitTPM = int(rpm), int(tpm)
	if len(k.AllowedModels) == 0 {
		k.AllowedModels = nil
	}
	return k, nil
}

func utc(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// limitsArgs are a key's limits as the columns of modelrelay_key_limits: NULL for "none".
func limitsArgs(l keys.Limits) []any {
	var models []string
	if len(l.AllowedModels) > 0 {
		models = l.AllowedModels
	}
	return []any{models, nullZero(l.RateLimitRPM), nullZero(l.TokenLimitTPM), nullZero(l.Priority), nullZero(l.MaxPriority),
		nullTime(l.ExpiresAt), nullZero(l.Cache)}
}

func nullZero[T comparable](v T) *T {
	var zero T
	if v == zero {
		return nil
	}
	return &v
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func noLimits(l keys.Limits) bool {
	return len(l.AllowedModels) == 0 && l.RateLimitRPM == 0 && l.TokenLimitTPM == 0 &&
		l.Priority == "" && l.MaxPriority == "" && l.ExpiresAt.IsZero() && l.Cache == ""
}

const upsertLimits = `INSERT INTO modelrelay_key_limits
	(key_id, allowed_models, rate_limit_rpm, token_limit_tpm, priority, max_priority, expires_at, cache)
VALUES ($1::uuid, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (key_id) DO UPDATE SET allowed_models = excluded.allowed_models,
	rate_limit_rpm = excluded.rate_limit_rpm, token_limit_tpm = excluded.token_limit_tpm,
	priority = excluded.priority, max_priority = excluded.max_priority, expires_at = excluded.expires_at,
	cache = excluded.cache`

// Insert stores the key and its limits in one transaction; a key without limits gets no
// limits row, like the Rust server's keys.
func (s *Store) Insert(ctx context.Context, k keys.Key, h keys.Hash) (keys.Key, error) {
	if !validUUID(k.ID) {
		return keys.Key{}, s.fail("insert key", errors.New("id "+k.ID+" is not a UUID"))
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var stored keys.Key
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO server_api_keys (id, name, prefix, hash) VALUES ($1::uuid, $2, $3, $4)`,
			k.ID, k.Name, k.Prefix, h[:])
		if err != nil {
			return err
		}
		if !noLimits(k.Limits) {
			if _, err := tx.Exec(ctx, upsertLimits, append([]any{k.ID}, limitsArgs(k.Limits)...)...); err != nil {
				return err
			}
		}
		// Read back what the database made of it (created_at, microsecond times).
		stored, err = scanKey(tx.QueryRow(ctx, selectKey+` WHERE k.id = $1::uuid`, k.ID))
		return err
	})
	if err != nil {
		return keys.Key{}, s.fail("insert key", err)
	}
	return stored, nil
}

// Find returns the active key with hash h.
func (s *Store) Find(ctx context.Context, h keys.Hash) (keys.Key, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	k, err := scanKey(s.pool.QueryRow(ctx, selectKey+` WHERE k.hash = $1 AND k.revoked_at IS NULL LIMIT 1`, h[:]))
	return s.found("find key", k, err)
}

// Get returns a key, revoked or not.
func (s *Store) Get(ctx context.Context, id string) (keys.Key, bool, error) {
	if !validUUID(id) {
		return keys.Key{}, false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	k, err := scanKey(s.pool.QueryRow(ctx, selectKey+` WHERE k.id = $1::uuid`, id))
	return s.found("get key", k, err)
}

// found turns a single-row read's result into the Store's (key, found, error).
func (s *Store) found(what string, k keys.Key, err error) (keys.Key, bool, error) {
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return keys.Key{}, false, nil
	case err != nil:
		return keys.Key{}, false, s.fail(what, err)
	}
	return k, true, nil
}

// List returns every key, newest first (ties by id, as the memory store).
func (s *Store) List(ctx context.Context) ([]keys.Key, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	rows, err := s.pool.Query(ctx, selectKey+` ORDER BY k.created_at DESC, k.id`)
	if err != nil {
		return nil, s.fail("list keys", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (keys.Key, error) { return scanKey(r) })
	if err != nil {
		return nil, s.fail("list keys", err)
	}
	return out, nil
}

// Revoke revokes an active key, as the Rust server's store does: revoking twice is "not found".
func (s *Store) Revoke(ctx context.Context, id string) (bool, error) {
	if !validUUID(id) {
		return false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	tag, err := s.pool.Exec(ctx, `UPDATE server_api_keys SET revoked_at = now() WHERE id = $1::uuid AND revoked_at IS NULL`, id)
	if err != nil {
		return false, s.fail("revoke key", err)
	}
	return tag.RowsAffected() > 0, nil
}

// Update patches a key's limits: it locks the key's row, so concurrent patches of one key
// apply one after the other, and upserts its limits row.
func (s *Store) Update(ctx context.Context, id string, p keys.Patch) (keys.Key, bool, error) {
	if !validUUID(id) {
		return keys.Key{}, false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var k keys.Key
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		k, err = scanKey(tx.QueryRow(ctx, selectKey+` WHERE k.id = $1::uuid FOR NO KEY UPDATE OF k`, id))
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, upsertLimits, append([]any{id}, limitsArgs(p.Apply(k.Limits))...)...); err != nil {
			return err
		}
		k, err = scanKey(tx.QueryRow(ctx, selectKey+` WHERE k.id = $1::uuid`, id))
		return err
	})
	return s.found("update key", k, err)
}
