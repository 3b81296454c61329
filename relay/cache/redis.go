package cache

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis keeps entries in Redis, shared by every node on it: one key per entry, under
// KeyPrefix and the tenant, expiring with its TTL (Redis's own maxmemory policy bounds the
// memory). Redis only spares the targets work: any failure is a miss, or a Put dropped, never
// an error to the client. After one, Redis is left alone for a second (every call meanwhile is
// a miss at once, not a wait for the timeout); the log says when it failed and when it came
// back, once each, and Failures counts what failed.
type Redis struct {
	rdb *redis.Client
	log *slog.Logger

	failures atomic.Uint64
	down     atomic.Bool
	retryAt  atomic.Int64 // Unix nanoseconds before which Redis is not asked
}

// KeyPrefix starts the name of every entry in Redis; Clear deletes only these.
const KeyPrefix = "modelrelay:cache:"

// Bounds of one call: the timeout on the request path, the pause after a failure, and how
// many names a step of Clear deletes at once.
const (
	redisTimeout = 250 * time.Millisecond
	redisPause   = time.Second
	clearBatch   = 500
)

// NewRedis returns a store on rdb.
func NewRedis(rdb *redis.Client, log *slog.Logger) *Redis {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Redis{rdb: rdb, log: log}
}

// Failures is how many calls to Redis failed (entries it held that did not decode
// included).
func (r *Redis) Failures() uint64 { return r.failures.Load() }

func (r *Redis) Get(ctx context.Context, k Key) (*Entry, bool) {
	if r.pausing() {
		return nil, false
	}
	call, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	b, err := r.rdb.Get(call, KeyPrefix+k.String()).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		r.answered()
		return nil, false
	case err != nil:
		r.failed(ctx, err)
		return nil, false
	}
	r.answered()
	e, err := decode(b)
	if err != nil {
		r.failures.Add(1)
		r.log.Debug("response cache: an entry in Redis did not decode; treated as a miss", "err", err)
		return nil, false
	}
	return e, true
}

func (r *Redis) Put(ctx context.Context, k Key, e *Entry, ttl time.Duration) {
	if r.pausing() || ttl <= 0 {
		return
	}
	call, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	if err := r.rdb.Set(call, KeyPrefix+k.String(), encode(nil, e), ttl).Err(); err != nil {
		r.failed(ctx, err)
		return
	}
	r.answered()
}

// Clear deletes every entry, and nothing else of the database: SCAN walks the names under
// KeyPrefix and UNLINK frees them in the background.
func (r *Redis) Clear(ctx context.Context) error {
	var cursor uint64
	for {
		names, next, err := r.rdb.Scan(ctx, cursor, KeyPrefix+"*", clearBatch).Result()
		if err != nil {
			return err
		}
		if len(names) > 0 {
			if err := r.rdb.Unlink(ctx, names...).Err(); err != nil {
				return err
			}
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}

// pausing reports whether a recent failure leaves Redis alone for now.
func (r *Redis) pausing() bool { return time.Now().UnixNano() < r.retryAt.Load() }

// failed notes a call that failed, unless it was the caller who gave up (a client gone).
func (r *Redis) failed(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	r.failures.Add(1)
	r.retryAt.Store(time.Now().Add(redisPause).UnixNano())
	if r.down.CompareAndSwap(false, true) {
		r.log.Warn("response cache: Redis unavailable; requests are served by targets until it is back", "err", err)
	}
}

func (r *Redis) answered() {
	if r.down.CompareAndSwap(true, false) {
		r.log.Info("response cache: Redis answers again")
	}
}
