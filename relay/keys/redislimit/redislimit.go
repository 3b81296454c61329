// Package redislimit shares client keys' rate and token limits between relay nodes through
// Redis, with the GCRA limiter of github.com/go-redis/redis_rate (one atomic script per call,
// the clock Redis's own, so nodes' clocks need not agree). When Redis cannot answer, each
// node falls back to its own buckets (keys.Local) rather than refusing or admitting
// everything, and says so in the log.
package redislimit

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"modelrelay/relay/keys"
)

// timeout bounds one Redis call on the request path; past it the node's own buckets decide.
const timeout = 250 * time.Millisecond

// Budget is keys.Budget on Redis.
type Budget struct {
	rate     *redis_rate.Limiter
	local    keys.Local // the fallback while Redis cannot answer
	log      *slog.Logger
	warnedAt atomic.Int64 // unix nanoseconds of the last "Redis unavailable" warning
}

// New returns a Budget on rdb.
func New(rdb *redis.Client, log *slog.Logger) *Budget {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Budget{rate: redis_rate.NewLimiter(rdb), log: log}
}

// Admit takes one request of key id. The token limit is checked first by taking one token
// (a request is admitted while the key has one left; what it used beyond that is charged
// after it), then the request limit.
func (b *Budget) Admit(ctx context.Context, id string, lim keys.Limits, now time.Time) (keys.Refusal, bool) {
	if lim.RateLimitRPM <= 0 && lim.TokenLimitTPM <= 0 {
		return keys.Refusal{}, true
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, c := range []struct {
		name  string
		key   string
		limit int
	}{{"token_limit_tpm", "modelrelay:tpm:" + id, lim.TokenLimitTPM}, {"rate_limit_rpm", "modelrelay:rpm:" + id, lim.RateLimitRPM}} {
		if c.limit <= 0 {
			continue
		}
		res, err := b.rate.Allow(ctx, c.key, redis_rate.PerMinute(c.limit))
		if err != nil {
			b.unavailable(err)
			return b.local.Admit(ctx, id, lim, now)
		}
		if res.Allowed == 0 {
			return keys.Refusal{Limit: c.name, Wait: max(res.RetryAfter, 0)}, false
		}
	}
	return keys.Refusal{}, true
}

// Charge counts what a request used against the key's token limit: all of it but the token
// Admit took, as far as the bucket holds (GCRA keeps no debt: an answer larger than what is
// left empties the bucket, and the key waits for the refill).
func (b *Budget) Charge(ctx context.Context, id string, lim keys.Limits, tokens int64, now time.Time) {
	if lim.TokenLimitTPM <= 0 || tokens <= 1 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	n := int(min(tokens-1, int64(lim.TokenLimitTPM)))
	if _, err := b.rate.AllowAtMost(ctx, "modelrelay:tpm:"+id, redis_rate.PerMinute(lim.TokenLimitTPM), n); err != nil {
		b.unavailable(err)
		b.local.Charge(ctx, id, lim, tokens, now)
	}
}

// Run keeps the fallback buckets tidy until ctx ends.
func (b *Budget) Run(ctx context.Context) { b.local.Run(ctx) }

// unavailable logs that Redis failed, at most every 30 s.
func (b *Budget) unavailable(err error) {
	now := time.Now().UnixNano()
	last := b.warnedAt.Load()
	if now-last < int64(30*time.Second) || !b.warnedAt.CompareAndSwap(last, now) {
		return
	}
	b.log.Warn("shared key limits: Redis unavailable; each node enforces limits on its own meanwhile", "err", err)
}
