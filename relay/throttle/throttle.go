// Package throttle slows down guessing of secrets (worker secrets, admin tokens, circuit
// tokens) per client address without ever refusing a correct secret.
//
// Locking a client address out after a few failures (the Rust relay's rule) also locks out
// every honest client behind the same address (NAT, one host running a buggy and a good
// worker). Instead, the caller checks the secret first and accepts a correct one at once;
// only the answer to a wrong one waits here. Answers to one address's failures are spaced
// Step apart, so a guesser learns at most one verdict per Step however many connections it
// opens; a failure whose turn is further than MaxHold away is answered at MaxHold and told it
// is being throttled. Memory is bounded: quiet addresses are forgotten.
package throttle

import (
	"context"
	"sync"
	"time"
)

// Throttle spaces out the answers to failed attempts per key (a client address).
type Throttle struct {
	Step    time.Duration // spacing between answered failures of one key
	MaxHold time.Duration // longest any failure is held

	mu   sync.Mutex
	next map[string]time.Time // key -> when its next failure may be answered
}

// New returns a Throttle answering one failure per step and key, holding none longer than
// maxHold.
func New(step, maxHold time.Duration) *Throttle {
	return &Throttle{Step: step, MaxHold: maxHold, next: make(map[string]time.Time)}
}

// maxKeys bounds the map; past it, keys whose turn has passed are forgotten.
const maxKeys = 4096

// Fail holds the caller until key's failure may be answered. It reports whether the failure
// got its own turn (true) or was cut off at MaxHold because the key is failing faster than
// one per Step (false: answer "rate limited"). It returns early, with false, when ctx ends.
func (t *Throttle) Fail(ctx context.Context, key string) (inTurn bool) {
	now := time.Now()
	t.mu.Lock()
	at := t.next[key]
	if at.Before(now) {
		at = now
	}
	at = at.Add(t.Step)
	t.next[key] = at
	if len(t.next) > maxKeys {
		t.prune(now)
	}
	t.mu.Unlock()
	wait := at.Sub(now)
	inTurn = wait <= t.MaxHold
	timer := time.NewTimer(min(wait, t.MaxHold))
	defer timer.Stop()
	select {
	case <-timer.C:
		return inTurn
	case <-ctx.Done():
		return false
	}
}

// prune forgets keys whose next turn has passed; called with mu held.
func (t *Throttle) prune(now time.Time) {
	for key, at := range t.next {
		if at.Before(now) {
			delete(t.next, key)
		}
	}
}
