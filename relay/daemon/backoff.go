package daemon

import (
	"math/rand/v2"
	"time"
)

// backoff decides how long to wait before the next connection attempt.
type backoff struct {
	min, max, graceful, stable, jitter time.Duration
	cur                                time.Duration
	rand                               func(n int64) int64 // [0, n); jitter source
}

func newBackoff(c Config) *backoff {
	return &backoff{min: c.BackoffMin, max: c.BackoffMax, graceful: c.GracefulDelay,
		stable: c.StableSession, jitter: c.MaxJitter, cur: c.BackoffMin, rand: rand.Int64N}
}

// next returns the wait after a session that ended as end and lasted lasted. A server that
// closed normally is restarting: come back soon. A session that lived long was healthy, so
// its loss starts the doubling over.
func (b *backoff) next(end sessionEnd, lasted time.Duration) time.Duration {
	var j time.Duration
	if b.jitter > 0 {
		j = time.Duration(b.rand(int64(b.jitter)))
	}
	if end.graceful {
		b.cur = b.min
		return b.graceful + j
	}
	if lasted > b.stable {
		b.cur = b.min
	}
	d := b.cur + j
	b.cur = min(b.cur*2, b.max)
	return d
}
