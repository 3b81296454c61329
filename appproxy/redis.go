package appproxy

import (
	"fmt"

	"github.com/redis/go-redis/v9"
)

// RedisClients connects to the coordinator's [redis] server: events on the URL's database (Pub/Sub
// ignores it anyway), last-used markers on LiveDB of the same server.
func RedisClients(redisURL string) (events, live *redis.Client, err error) {
	opts, err := redis.ParseURL(redisURL)
	if err != nil {
		return nil, nil, fmt.Errorf("redis_url: %w", err)
	}
	liveOpts := *opts
	liveOpts.DB = LiveDB
	return redis.NewClient(opts), redis.NewClient(&liveOpts), nil
}
