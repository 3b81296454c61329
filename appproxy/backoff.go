package appproxy

import (
	"context"
	"time"
)

// Backoff for registration retries and resubscription: 1 s doubling to 30 s.
const (
	defaultMinBackoff = time.Second
	defaultMaxBackoff = 30 * time.Second
)

// backoff yields min, 2·min, 4·min … capped at max.
type backoff struct {
	min, max, next time.Duration
}

func newBackoff(min, max time.Duration) *backoff {
	if min <= 0 {
		min = defaultMinBackoff
	}
	if max < min {
		max = min
	}
	return &backoff{min: min, max: max, next: min}
}

// Next is the delay before the next attempt.
func (b *backoff) Next() time.Duration {
	d := b.next
	b.next = min(b.next*2, b.max)
	return d
}

// Reset starts over after a success.
func (b *backoff) Reset() { b.next = b.min }

// sleep waits d or until ctx is done; false means ctx is done.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
