package keys

import (
	"context"
	"math"
	"sync"
	"time"
)

// Budget admits a key's requests against its rate and token limits and charges what they
// used. Local keeps the buckets in this process; package redislimit shares them between
// nodes through Redis.
type Budget interface {
	// Admit takes one request of key id; ok false says which limit refused and for how long.
	Admit(ctx context.Context, id string, lim Limits, now time.Time) (no Refusal, ok bool)
	// Charge counts the tokens a request used against the key's token limit.
	Charge(ctx context.Context, id string, lim Limits, tokens int64, now time.Time)
}

// Local is the Budget of one process: a Limiter per key.
type Local struct {
	limiters sync.Map // key id -> *Limiter
}

// Limiter returns a key's limiter (one per key id, kept across cache refreshes so that
// changing a key's limits does not reset what it used).
func (l *Local) Limiter(id string) *Limiter {
	if v, ok := l.limiters.Load(id); ok {
		return v.(*Limiter)
	}
	v, _ := l.limiters.LoadOrStore(id, &Limiter{})
	return v.(*Limiter)
}

func (l *Local) Admit(_ context.Context, id string, lim Limits, now time.Time) (Refusal, bool) {
	if lim.RateLimitRPM <= 0 && lim.TokenLimitTPM <= 0 {
		return Refusal{}, true
	}
	return l.Limiter(id).Admit(lim, now)
}

func (l *Local) Charge(_ context.Context, id string, lim Limits, tokens int64, now time.Time) {
	if lim.TokenLimitTPM > 0 && tokens > 0 {
		l.Limiter(id).Charge(lim, tokens, now)
	}
}

// Sweep forgets the limiters that have refilled: forgetting them changes nothing.
func (l *Local) Sweep(now time.Time) {
	l.limiters.Range(func(id, v any) bool {
		if v.(*Limiter).idle(now) {
			l.limiters.Delete(id)
		}
		return true
	})
}

// Run sweeps every minute until ctx ends.
func (l *Local) Run(ctx context.Context) {
	every(ctx, time.Minute, func() { l.Sweep(time.Now()) })
}

// Limiter enforces one key's rate_limit_rpm and token_limit_tpm in this process. Both are
// token buckets that refill evenly over a minute: rpm holds up to rpm requests, tpm up to tpm
// tokens. A request is admitted while the token bucket is above zero (how many tokens a
// request will use is unknown before it runs); what it used is charged after it, which may
// take the bucket below zero: the key then waits until the refill brings it back.
type Limiter struct {
	mu       sync.Mutex
	started  bool
	last     time.Time // when the buckets were last brought up to date
	requests float64   // rpm bucket
	tokens   float64   // tpm bucket
	fullAt   time.Time // when both buckets will be full again
}

// Refusal says which limit refused a request and when to try again.
type Refusal struct {
	Limit string // "rate_limit_rpm" or "token_limit_tpm"
	Wait  time.Duration
}

// Admit takes one request against l's limits at now. ok false says which limit refused and
// for how long.
func (l *Limiter) Admit(lim Limits, now time.Time) (Refusal, bool) {
	if lim.RateLimitRPM <= 0 && lim.TokenLimitTPM <= 0 {
		return Refusal{}, true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refill(lim, now)
	if tpm := float64(lim.TokenLimitTPM); tpm > 0 && l.tokens <= 0 {
		return Refusal{"token_limit_tpm", perMinute(1-l.tokens, tpm)}, false
	}
	if rpm := float64(lim.RateLimitRPM); rpm > 0 {
		if l.requests < 1 {
			return Refusal{"rate_limit_rpm", perMinute(1-l.requests, rpm)}, false
		}
		l.requests--
	}
	l.mark(lim, now)
	return Refusal{}, true
}

// Charge counts the tokens a request used against the tpm limit.
func (l *Limiter) Charge(lim Limits, tokens int64, now time.Time) {
	if lim.TokenLimitTPM <= 0 || tokens <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refill(lim, now)
	l.tokens -= float64(tokens)
	l.mark(lim, now)
}

// mark records when both buckets will be full again.
func (l *Limiter) mark(lim Limits, now time.Time) {
	var wait time.Duration
	if rpm := float64(lim.RateLimitRPM); rpm > 0 {
		wait = perMinute(rpm-l.requests, rpm)
	}
	if tpm := float64(lim.TokenLimitTPM); tpm > 0 {
		wait = max(wait, perMinute(tpm-l.tokens, tpm))
	}
	l.fullAt = now.Add(wait)
}

// refill brings both buckets up to now. A new limiter starts full. A limit lowered since is
// applied at once (the buckets never hold more than the limits).
func (l *Limiter) refill(lim Limits, now time.Time) {
	rpm, tpm := float64(lim.RateLimitRPM), float64(lim.TokenLimitTPM)
	if !l.started {
		l.started, l.last, l.requests, l.tokens = true, now, rpm, tpm
		return
	}
	minutes := now.Sub(l.last).Minutes()
	if minutes <= 0 {
		minutes = 0
	}
	l.last = now
	l.requests = math.Min(l.requests+minutes*rpm, rpm)
	l.tokens = math.Min(l.tokens+minutes*tpm, tpm)
}

// idle reports whether the limiter has refilled, so forgetting it changes nothing.
func (l *Limiter) idle(now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return now.After(l.fullAt)
}

// perMinute is how long a bucket refilling rate per minute takes to gain need.
func perMinute(need, rate float64) time.Duration {
	return time.Duration(need / rate * float64(time.Minute))
}
