package appproxy

import (
	"fmt"
	"net/url"

	"github.com/redis/go-redis/v9"
)

// RedisClients connects to the coordinator's [redis] server: events on the URL's database
// (Pub/Sub ignores it anyway), last-used markers on LiveDB of the same server. A URL with
// ?master_name=NAME names a Sentinel master: redis://sentinel-host:26379?master_name=mymaster.
func RedisClients(redisURL string) (events, live *redis.Client, err error) {
	if u, perr := url.Parse(redisURL); perr == nil && u.Query().Has("master_name") {
		fo, err := redis.ParseFailoverURL(redisURL)
		if err != nil {
			return nil, nil, fmt.Errorf("redis_url: %w", err)
		}
		liveOpts := *fo
		liveOpts.DB = LiveDB
		return redis.NewFailoverClient(fo), redis.NewFailoverClient(&liveOpts), nil
	}
	opts, err := redis.ParseURL(redisURL)
	if err != nil {
		return nil, nil, fmt.Errorf("redis_url: %w", err)
	}
	liveOpts := *opts
	liveOpts.DB = LiveDB
	return redis.NewClient(opts), redis.NewClient(&liveOpts), nil
}
