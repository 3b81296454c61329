package relay

import (
	"sync"
	"time"
)

// authLimiter blocks a client that keeps failing worker authentication: three failures inside
// the window block it for the window. It is keyed by peer IP (never a forwarded header from an
// untrusted peer) so one bad worker cannot lock every other worker out.
type authLimiter struct {
	window time.Duration
	limit  int

	mu      sync.Mutex
	clients map[string]*authRecord
}

type authRecord struct {
	failures     []time.Time
	blockedUntil time.Time
}

func newAuthLimiter(window time.Duration) *authLimiter {
	return &authLimiter{window: window, limit: 3, clients: make(map[string]*authRecord)}
}

func (l *authLimiter) blocked(client string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	rec := l.clients[client]
	return rec != nil && now.Before(rec.blockedUntil)
}

func (l *authLimiter) fail(client string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.prune(now)
	rec := l.clients[client]
	if rec == nil {
		rec = &authRecord{}
		l.clients[client] = rec
	}
	recent := rec.failures[:0]
	for _, t := range rec.failures {
		if now.Sub(t) < l.window {
			recent = append(recent, t)
		}
	}
	rec.failures = append(recent, now)
	if len(rec.failures) >= l.limit {
		rec.blockedUntil = now.Add(l.window)
		rec.failures = rec.failures[:0]
	}
}

// prune forgets quiet clients so a scan of many addresses cannot grow the map without bound.
func (l *authLimiter) prune(now time.Time) {
	if len(l.clients) < 1024 {
		return
	}
	for client, rec := range l.clients {
		if now.After(rec.blockedUntil) && (len(rec.failures) == 0 || now.Sub(rec.failures[len(rec.failures)-1]) > l.window) {
			delete(l.clients, client)
		}
	}
}
