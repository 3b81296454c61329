// Package keys holds client API keys: the key store interface and its
// in-memory implementation, the validated-key cache that keeps the store off the request path,
// per-key request and token limits, and the usage ledger that batches what keys used into the
// store. PostgreSQL lives in the subpackage postgres. It imports nothing of the relay's.
//
// A key's secret is "mr_live_" and 32 alphanumerics; the store keeps only its SHA-256 and its
// first 16 characters (the prefix an operator recognises it by), as the Rust server does, so a
// Rust deployment's table works unchanged.
package keys

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"time"

	"modelrelay/protocol"
)

// SecretPrefix starts every secret.
const SecretPrefix = "mr_live_"

// secretLen is the random part of a secret; prefixLen is how much of it is shown.
const (
	secretLen = 32
	prefixLen = len(SecretPrefix) + 8
)

// ErrUnavailable means the store could not answer (the database is down or too slow).
var ErrUnavailable = errors.New("key store unavailable")

// Key is a client API key as the admin API shows it: never its secret or hash.
type Key struct {
	ID         string
	Name       string
	Prefix     string
	CreatedAt  time.Time
	LastUsedAt time.Time // zero: never used
	RevokedAt  time.Time // zero: active
	Limits
}

// Limits are what a key may do beyond the Rust server's keys (our own table).
type Limits struct {
	AllowedModels []string  // path.Match globs; empty: every model
	RateLimitRPM  int       // requests per minute; 0: unlimited
	TokenLimitTPM int       // input plus output tokens per minute; 0: unlimited
	Priority      string    // the default priority class of its requests ("" = normal)
	MaxPriority   string    // the highest class its requests may ask for ("" = Priority, else normal)
	ExpiresAt     time.Time // zero: never
	// Cache is how its requests use the response cache: CacheDefault, CacheOff, or "" (only
	// those that ask for it).
	Cache string
}

// A key's Cache: its requests use the response cache unless they say otherwise, or never.
const (
	CacheDefault = "default"
	CacheOff     = "off"
)

// Patch changes some of a key's limits; nil fields stay as they are. A zero ExpiresAt clears
// the expiry, an empty AllowedModels allows every model, a zero limit lifts it.
type Patch struct {
	AllowedModels *[]string
	RateLimitRPM  *int
	TokenLimitTPM *int
	Priority      *string
	MaxPriority   *string
	ExpiresAt     *time.Time
	Cache         *string
}

// Apply returns l changed by p.
func (p Patch) Apply(l Limits) Limits {
	if p.AllowedModels != nil {
		l.AllowedModels = *p.AllowedModels
	}
	if p.RateLimitRPM != nil {
		l.RateLimitRPM = *p.RateLimitRPM
	}
	if p.TokenLimitTPM != nil {
		l.TokenLimitTPM = *p.TokenLimitTPM
	}
	if p.Priority != nil {
		l.Priority = *p.Priority
	}
	if p.MaxPriority != nil {
		l.MaxPriority = *p.MaxPriority
	}
	if p.ExpiresAt != nil {
		l.ExpiresAt = *p.ExpiresAt
	}
	if p.Cache != nil {
		l.Cache = *p.Cache
	}
	return l
}

// Usage is what one key used of one model on one UTC day.
type Usage struct {
	KeyID        string
	Day          time.Time // midnight UTC
	Model        string
	Requests     int64
	InputTokens  int64
	OutputTokens int64
}

// Hash is what a store keeps of a secret.
type Hash [sha256.Size]byte

// HashOf hashes a presented secret.
func HashOf(secret string) Hash {
	var buf [64]byte // a secret fits: hashing it allocates nothing
	return sha256.Sum256(append(buf[:0], secret...))
}

// Store keeps keys and their usage. Lookups by id treat an id that is not one (not a UUID) as
// unknown. Errors other than "not found" wrap ErrUnavailable when the store could not be
// reached.
type Store interface {
	// Insert stores a new key (its ID, Name, Prefix and Limits set) and returns it as stored.
	Insert(ctx context.Context, k Key, h Hash) (Key, error)
	// Find returns the active (not revoked) key with hash h.
	Find(ctx context.Context, h Hash) (Key, bool, error)
	// Get returns a key, revoked or not.
	Get(ctx context.Context, id string) (Key, bool, error)
	// List returns every key, revoked ones too, newest first.
	List(ctx context.Context) ([]Key, error)
	// Revoke revokes an active key; false when there is no such active key.
	Revoke(ctx context.Context, id string) (bool, error)
	// Update changes a key's limits; false when there is no such key.
	Update(ctx context.Context, id string, p Patch) (Key, bool, error)
	// Record adds usage rows to the totals and moves keys' last use forward, all or nothing.
	Record(ctx context.Context, rows []Usage, used map[string]time.Time) error
	// Usage returns a key's totals by day, then model.
	Usage(ctx context.Context, id string) ([]Usage, error)
	Close()
}

// NewSecret returns a fresh secret and what is shown of it.
func NewSecret() (secret, prefix string) {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, len(SecretPrefix)+secretLen)
	copy(b, SecretPrefix)
	var r [64]byte
	for n := len(SecretPrefix); n < len(b); {
		rand.Read(r[:])
		for _, c := range r {
			// 248 = 4 × 62: rejecting above it keeps every character equally likely.
			if c < 248 && n < len(b) {
				b[n] = alphabet[int(c)%len(alphabet)]
				n++
			}
		}
	}
	s := string(b)
	return s, s[:prefixLen]
}

// NewID returns a new key id: a random (version 4) UUID, as the Rust server's table holds.
func NewID() string { return protocol.NewUUID() }

// Day is the UTC day of t, as usage is kept.
func Day(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}
