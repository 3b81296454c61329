package keys

import (
	"context"
	"errors"
	"maps"
	"sync"
	"sync/atomic"
	"time"
)

// ErrInvalid means the presented secret is no active key: unknown, revoked or expired. The
// client gets 401 "Invalid API key" whichever it was.
var ErrInvalid = errors.New("invalid API key")

// MaxCacheTTL bounds how long a validated key is trusted without asking the store again: a
// key revoked on any node stops working everywhere within it.
const MaxCacheTTL = 5 * time.Second

// retryAfterFailure is how long a cached key is trusted again after the store failed to
// confirm it (the store is down: cached keys keep working, the store is asked once a second).
const retryAfterFailure = time.Second

// Auth validates presented secrets. Validated keys are cached by hash for the TTL, so the
// store sees one lookup per key per TTL, not one per request; unknown secrets are not cached
// (a key created on another node works at once) and go to the store each time: the caller
// throttles wrong guesses. While the store is unreachable, cached keys keep working and
// uncached ones fail closed with ErrUnavailable.
type Auth struct {
	store Store
	ttl   time.Duration
	now   func() time.Time
	// entries is copied on write (a key enters once per TTL at most; every request reads it),
	// so a read is one atomic load and a map lookup, with no lock and no allocation.
	entries atomic.Pointer[map[Hash]*entry]
	writeMu sync.Mutex
}

// entry is one validated key in the cache.
type entry struct {
	key        atomic.Pointer[Key]
	checked    atomic.Int64 // unix nanoseconds the store last confirmed it (or a failure was forgiven)
	refreshing atomic.Bool
	used       atomic.Int64 // unix nanoseconds of its last use, for sweeping
}

// NewAuth returns an Auth over store, trusting a validated key for ttl (at most MaxCacheTTL;
// zero means MaxCacheTTL).
func NewAuth(store Store, ttl time.Duration) *Auth {
	if ttl <= 0 || ttl > MaxCacheTTL {
		ttl = MaxCacheTTL
	}
	a := &Auth{store: store, ttl: ttl, now: time.Now}
	a.entries.Store(&map[Hash]*entry{})
	return a
}

// edit changes the cache under the write lock, on a copy.
func (a *Auth) edit(fn func(m map[Hash]*entry)) {
	a.writeMu.Lock()
	defer a.writeMu.Unlock()
	m := maps.Clone(*a.entries.Load())
	fn(m)
	a.entries.Store(&m)
}

// Store is the store behind the cache.
func (a *Auth) Store() Store { return a.store }

// Check returns the key a secret belongs to at now (the request's arrival: the clock is read
// once per request). Errors: ErrInvalid, or one wrapping ErrUnavailable when the store could
// not say.
func (a *Auth) Check(ctx context.Context, secret string, now time.Time) (*Key, error) {
	h := HashOf(secret)
	if e, ok := (*a.entries.Load())[h]; ok {
		e.used.Store(now.UnixNano())
		if now.UnixNano()-e.checked.Load() >= int64(a.ttl) && e.refreshing.CompareAndSwap(false, true) {
			// One request per key and TTL asks the store; others meanwhile use what is cached.
			err := a.refresh(ctx, h, e)
			e.refreshing.Store(false)
			if err != nil {
				return nil, err
			}
		}
		return a.valid(e.key.Load(), now)
	}
	k, found, err := a.store.Find(ctx, h)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, ErrInvalid
	}
	e := &entry{}
	e.key.Store(&k)
	e.checked.Store(now.UnixNano())
	e.used.Store(now.UnixNano())
	a.edit(func(m map[Hash]*entry) { m[h] = e })
	return a.valid(&k, now)
}

// refresh asks the store about a cached key again. A revoked key leaves the cache; a store
// that does not answer leaves the cached key trusted for another second.
func (a *Auth) refresh(ctx context.Context, h Hash, e *entry) error {
	k, found, err := a.store.Find(ctx, h)
	switch {
	case err != nil && ctx.Err() == nil:
		e.checked.Store(a.now().Add(retryAfterFailure - a.ttl).UnixNano())
		return nil
	case err != nil:
		return err
	case !found:
		a.edit(func(m map[Hash]*entry) {
			if m[h] == e {
				delete(m, h)
			}
		})
		return ErrInvalid
	}
	e.key.Store(&k)
	e.checked.Store(a.now().UnixNano())
	return nil
}

func (a *Auth) valid(k *Key, now time.Time) (*Key, error) {
	if !k.ExpiresAt.IsZero() && !now.Before(k.ExpiresAt) {
		return nil, ErrInvalid
	}
	return k, nil
}

// Forget drops a key from this node's cache at once (after the admin API revoked or changed
// it here; other nodes notice within the TTL).
func (a *Auth) Forget(id string) {
	a.edit(func(m map[Hash]*entry) {
		maps.DeleteFunc(m, func(_ Hash, e *entry) bool { return e.key.Load().ID == id })
	})
}

// Sweep drops keys not used for idle, so the cache holds what is in use, not everything ever
// presented.
func (a *Auth) Sweep(idle time.Duration) {
	cutoff := a.now().Add(-idle).UnixNano()
	a.edit(func(m map[Hash]*entry) {
		maps.DeleteFunc(m, func(_ Hash, e *entry) bool { return e.used.Load() < cutoff })
	})
}

// Run sweeps the cache every minute until ctx ends.
func (a *Auth) Run(ctx context.Context) {
	every(ctx, time.Minute, func() { a.Sweep(10 * time.Minute) })
}

// every runs fn every period until ctx ends.
func every(ctx context.Context, period time.Duration, fn func()) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

// Allows reports whether the key may use model: its allowed_models globs (none: every model).
func (k *Key) Allows(model string) bool {
	if len(k.AllowedModels) == 0 {
		return true
	}
	for _, glob := range k.AllowedModels {
		if Match(glob, model) {
			return true
		}
	}
	return false
}

// Match reports whether name matches glob, where '*' stands for any run of characters, '/'
// included (model names are often "org/model": "*" must allow them all), and '?' for any one
// byte. There are no character classes or escapes: model names hold no '*' or '?'.
func Match(glob, name string) bool {
	// The classic greedy match with one backtrack point: linear in practice, never exponential.
	g, n := 0, 0
	star, mark := -1, 0
	for n < len(name) {
		switch {
		case g < len(glob) && (glob[g] == '?' || glob[g] == name[n]):
			g++
			n++
		case g < len(glob) && glob[g] == '*':
			star, mark = g, n
			g++
		case star >= 0:
			mark++
			g, n = star+1, mark
		default:
			return false
		}
	}
	for g < len(glob) && glob[g] == '*' {
		g++
	}
	return g == len(glob)
}
