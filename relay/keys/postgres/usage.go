package postgres

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"modelrelay/relay/keys"
)

// addUsage adds a batch of usage rows to the totals in one statement. The batch holds each
// (key, day, model) once: ON CONFLICT cannot update one row twice.
const addUsage = `INSERT INTO modelrelay_key_usage AS t (key_id, day, model, requests, input_tokens, output_tokens)
SELECT u.key_id::uuid, u.day, u.model, u.requests, u.input_tokens, u.output_tokens
FROM unnest($1::text[], $2::date[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[])
	AS u(key_id, day, model, requests, input_tokens, output_tokens)
ON CONFLICT (key_id, day, model) DO UPDATE SET
	requests = t.requests + excluded.requests,
	input_tokens = t.input_tokens + excluded.input_tokens,
	output_tokens = t.output_tokens + excluded.output_tokens`

// touchKeys moves keys' last use forward, never back (GREATEST skips a NULL last use).
const touchKeys = `UPDATE server_api_keys AS k SET last_used_at = GREATEST(k.last_used_at, u.at)
FROM unnest($1::text[], $2::timestamptz[]) AS u(id, at)
WHERE k.id = u.id::uuid`

// Record adds the usage rows and moves the keys' last use forward in one transaction. Rows and
// keys are sorted first, so concurrent batches lock rows in the same order and cannot deadlock.
// Rows of an id that is not a UUID cannot belong to any key and are dropped rather than fail
// the batch.
func (s *Store) Record(ctx context.Context, rows []keys.Usage, used map[string]time.Time) error {
	batch := sumUsage(rows)
	ids := slices.Sorted(maps.Keys(used))
	ids = slices.DeleteFunc(ids, func(id string) bool { return !validUUID(id) || used[id].IsZero() })
	if len(batch) == 0 && len(ids) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if len(batch) > 0 {
			var (
				key, model              []string
				day                     []time.Time
				requests, input, output []int64
			)
			for _, u := range batch {
				key, day, model = append(key, u.KeyID), append(day, u.Day), append(model, u.Model)
				requests = append(requests, u.Requests)
				input, output = append(input, u.InputTokens), append(output, u.OutputTokens)
			}
			if _, err := tx.Exec(ctx, addUsage, key, day, model, requests, input, output); err != nil {
				return err
			}
		}
		if len(ids) > 0 {
			at := make([]time.Time, len(ids))
			for i, id := range ids {
				at[i] = used[id]
			}
			if _, err := tx.Exec(ctx, touchKeys, ids, at); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return s.fail("record usage", err)
	}
	return nil
}

// sumUsage merges rows of the same key, UTC day and model, drops rows whose key id is not a
// UUID, and sorts the rest by key, day and model.
func sumUsage(rows []keys.Usage) []keys.Usage {
	out := make([]keys.Usage, 0, len(rows))
	for _, r := range rows {
		if validUUID(r.KeyID) {
			r.KeyID, r.Day = strings.ToLower(r.KeyID), keys.Day(r.Day)
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b keys.Usage) int {
		return cmp.Or(strings.Compare(a.KeyID, b.KeyID), a.Day.Compare(b.Day), strings.Compare(a.Model, b.Model))
	})
	merged := out[:0]
	for _, r := range out {
		if n := len(merged); n > 0 && merged[n-1].KeyID == r.KeyID && merged[n-1].Day.Equal(r.Day) && merged[n-1].Model == r.Model {
			merged[n-1].Requests += r.Requests
			merged[n-1].InputTokens += r.InputTokens
			merged[n-1].OutputTokens += r.OutputTokens
			continue
		}
		merged = append(merged, r)
	}
	return merged
}

// Usage returns a key's totals by day, then model in byte order (COLLATE "C"), as
// keys.SortUsage orders them.
func (s *Store) Usage(ctx context.Context, id string) ([]keys.Usage, error) {
	if !validUUID(id) {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT key_id::text, day, model, requests, input_tokens, output_tokens
		FROM modelrelay_key_usage WHERE key_id = $1::uuid ORDER BY day, model COLLATE "C"`, id)
	if err != nil {
		return nil, s.fail("read usage", err)
	}
	var out []keys.Usage
	var u keys.Usage
	_, err = pgx.ForEachRow(rows, []any{&u.KeyID, &u.Day, &u.Model, &u.Requests, &u.InputTokens, &u.OutputTokens}, func() error {
		u.Day = keys.Day(u.Day)
		out = append(out, u)
		return nil
	})
	if err != nil {
		return nil, s.fail("read usage", err)
	}
	return out, nil
}

// validUUID reports whether id is a UUID in its usual form (8-4-4-4-12 hex digits); anything
// else is an unknown id, answered without asking the database.
func validUUID(id string) bool {
	if len(id) != 36 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if c != '-' {
				return false
			}
		case '0' <= c && c <= '9', 'a' <= c && c <= 'f', 'A' <= c && c <= 'F':
		default:
			return false
		}
	}
	return true
}
