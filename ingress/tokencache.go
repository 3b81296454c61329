package ingress

import (
	"sync"
	"sync/atomic"
	"time"
)

// tokenCache remembers tokens that verified, so a client's repeated calls with the same token
// skip the HMAC and JSON work. The key is the whole token, signature included: only a token
// byte-identical to one that verified under this secret can hit, and its exp is checked again
// on every hit. Failures are never cached. nbf and iat need no re-check: they held at
// verification, and time only moves forward.
type tokenCache struct {
	entries atomic.Pointer[sync.Map] // token -> cachedToken
	size    atomic.Int64
	limit   int64
}

type cachedToken struct {
	id  string
	exp time.Time // zero: no exp claim
}

func newTokenCache(limit int64) *tokenCache {
	c := &tokenCache{limit: limit}
	c.entries.Store(new(sync.Map))
	return c
}

func (c *tokenCache) get(token string, now time.Time) (string, bool) {
	v, ok := c.entries.Load().Load(token)
	if !ok {
		return "", false
	}
	t := v.(cachedToken)
	if !t.exp.IsZero() && !now.Before(t.exp) {
		return "", false // expired since: verify again, which reports it properly
	}
	return t.id, true
}

func (c *tokenCache) put(token string, t cachedToken) {
	if c.size.Add(1) > c.limit {
		// Start over rather than track recency: a full cache is rare and refills at once.
		c.entries.Store(new(sync.Map))
		c.size.Store(1)
	}
	c.entries.Load().Store(token, t)
}
