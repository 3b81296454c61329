// Package throttle slows down guessing of secrets (worker secrets, admin tokens, circuit
// tokens, client API keys) per client address without ever refusing a correct secret.
//
// Locking a client address out after a few failures (the Rust relay's rule) also locks out
// every honest client behind the same address (NAT, one host running a buggy and a good
// worker). Instead, the caller checks the secret first and accepts a correct one at once;
// only the answer to a wrong one waits here.
//
// The rule, per key (a client address): failures take turns Step apart, and at most MaxHold
// of turns are handed out ahead, so one address gets at most one failure answered in turn per
// Step however many connections it opens. A failure that finds every turn up to MaxHold taken
// gets no turn and takes none from later failures: it is held MaxHold and answered "rate
// limited" (429 or the worker protocol's close reason), never with the verdict on its secret.
// Holding it costs the guesser a connection for MaxHold per attempt; answering it at once
// would let a flood learn its answers as fast as it sends. (A correct secret is accepted at
// once, so no answer can hide that a secret was not accepted; what the throttle bounds is how
// fast an address learns it.)
//
// Memory is bounded: a key is forgotten once its last turn has passed, and at most maxKeys
// keys are held; a failure from a new address that finds the table full is answered out of
// turn.
package throttle

import (
	"context"
	"sync"
	"time"
)

// Throttle spaces out the answers to failed attempts per key (a client address).
type Throttle struct {
	Step    time.Duration // spacing between failures of one key answered in turn
	MaxHold time.Duration // longest any failure is held; turns are handed out this far ahead

	mu       sync.Mutex
	next     map[string]time.Time // key -> its last turn handed out
	prunedAt time.Time            // last sweep of passed turns
}

// New returns a Throttle answering one failure per step and key, holding none longer than
// maxHold.
func New(step, maxHold time.Duration) *Throttle {
	return &Throttle{Step: step, MaxHold: maxHold, next: make(map[string]time.Time)}
}

// maxKeys bounds the table of addresses with turns still ahead.
const maxKeys = 4096

// Fail holds the caller until key's failure may be answered. It reports whether the failure
// got a turn (true: answer with the verdict) or not, because key's turns are taken up to
// MaxHold ahead (false, after MaxHold: answer "rate limited"). It returns early, with false,
// when ctx ends.
func (t *Throttle) Fail(ctx context.Context, key string) (inTurn bool) {
	now := time.Now()
	t.mu.Lock()
	at := t.turn(key, now)
	t.mu.Unlock()
	inTurn = !at.IsZero()
	hold := t.MaxHold
	if inTurn {
		hold = at.Sub(now)
	}
	timer := time.NewTimer(hold)
	defer timer.Stop()
	select {
	case <-timer.C:
		return inTurn
	case <-ctx.Done():
		return false
	}
}

// turn hands key its next turn, or the zero time when it gets none; called with mu held.
func (t *Throttle) turn(key string, now time.Time) time.Time {
	last, known := t.next[key]
	if last.Before(now) {
		last = now
	}
	at := last.Add(t.Step)
	if at.Sub(now) > t.MaxHold {
		return time.Time{}
	}
	if !known && len(t.next) >= maxKeys && !t.prune(now) {
		return time.Time{}
	}
	t.next[key] = at
	return at
}

// prune forgets keys whose last turn has passed, at most once per Step (a flood of new
// addresses against a full table must not sweep it on every failure). It reports whether
// there is room for a new key; called with mu held.
func (t *Throttle) prune(now time.Time) bool {
	if now.Sub(t.prunedAt) >= t.Step {
		t.prunedAt = now
		for key, at := range t.next {
			if !at.After(now) {
				delete(t.next, key)
			}
		}
	}
	return len(t.next) < maxKeys
}
