package responses

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis is a Store every node of a relay shares: one Redis key per record, expiring with the
// TTL. Each call is bounded by a short timeout; an error is ErrUnavailable.
type Redis struct {
	rdb    redis.UniversalClient
	prefix string
	ttl    time.Duration
}

// callTimeout bounds one Redis call: a store that does not answer is down, and a client waits
// no longer for it.
const callTimeout = 2 * time.Second

// NewRedis keeps records in rdb under prefix (e.g. "modelrelay:responses:") for ttl.
func NewRedis(rdb redis.UniversalClient, prefix string, ttl time.Duration) *Redis {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	return &Redis{rdb: rdb, prefix: prefix, ttl: ttl}
}

func (s *Redis) Get(ctx context.Context, id string) (*Record, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	b, err := s.rdb.Get(ctx, s.prefix+id).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	var r Record
	if json.Unmarshal(b, &r) != nil {
		return nil, false, nil // not ours, or torn: as good as unknown
	}
	return &r, true, nil
}

func (s *Redis) Put(ctx context.Context, id string, r *Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if err := s.rdb.Set(ctx, s.prefix+id, b, s.ttl).Err(); err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return nil
}

func (s *Redis) Delete(ctx context.Context, id string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	n, err := s.rdb.Del(ctx, s.prefix+id).Result()
	if err != nil {
		return false, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return n > 0, nil
}
