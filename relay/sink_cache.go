package relay

import (
	"context"
	"net/http"
	"time"

	"modelrelay/relay/cache"
)

// cacheSink records the answer the client receives for the response cache, nearest the
// client: after translation and x_pool_meta, byte for byte. Only a complete success is
// stored: a 200 whose body came whole (its announced length, when it had one) or an event
// stream that reached its terminal event; unencoded (the entry is replayed to any client),
// and within the cache's bound on one entry and on all recordings (past either, the answer
// goes on unrecorded). It is stored when the answer ends, so the next identical request is
// a hit. A failure, a held answer replayed, a stream cut short: nothing is stored.
type cacheSink struct {
	next  Sink
	out   Sink // what next's Head returned: the body goes there
	cache *responseCache
	key   cache.Key
	ctx   context.Context // the request's, without its cancellation: the store outlives a client gone at the end
	sent  http.Header     // the client's head as written: what describes the answer is stored from it

	recording bool
	stream    bool
	length    int64
	body      []byte
}

// cachedHeaders are the headers an entry keeps: the answer's type and the relay's headers
// that describe it. Those that describe one delivery (the target, the queue time) are not.
var cachedHeaders = [...]string{"Content-Type", "X-Modelrelay-Model", "X-Modelrelay-Fallback-From", translatedHeader,
	"X-Modelrelay-Estimated"}

// record stores the request's answer in c under k: its lookup missed, or it asked to refresh.
func (a *answer) record(ctx context.Context, c *responseCache, k cache.Key) {
	a.caching = true
	a.extras().cache = cacheSink{cache: c, key: k, ctx: ctx, sent: a.client.w.Header()}
}

func (c *cacheSink) wrap(next Sink) Sink {
	c.drop()
	c.next = next
	return c
}

func (c *cacheSink) Head(status int, h http.Header, length int64) (Sink, error) {
	c.drop()
	out, err := c.next.Head(status, h, length)
	if err != nil {
		return nil, err
	}
	c.out = out
	if status != http.StatusOK || h.Get("Content-Encoding") != "" {
		return out, nil
	}
	c.recording, c.stream, c.length = true, isEventStream(h), length
	return c, nil
}

func (c *cacheSink) Chunk(b []byte, flush bool) error {
	if err := c.out.Chunk(b, flush); err != nil {
		c.drop()
		return err
	}
	if c.recording {
		if len(c.body)+len(b) > c.cache.maxEntry || !c.cache.reserve(len(b)) {
			c.drop()
			return nil
		}
		c.body = append(c.body, b...)
	}
	return nil
}

func (c *cacheSink) End() error {
	err := c.next.End()
	if err == nil && c.recording && c.complete() {
		e := &cache.Entry{Header: make(http.Header, len(cachedHeaders)), Body: c.body, Stream: c.stream, Stored: time.Now()}
		for _, name := range cachedHeaders {
			if v := c.sent.Values(name); len(v) > 0 {
				e.Header[name] = append([]string(nil), v...)
			}
		}
		c.cache.Store.Put(c.ctx, c.key, e, c.cache.TTL)
		c.cache.release(len(c.body))
		c.recording, c.body = false, nil // the store keeps the body
	}
	c.drop()
	return err
}

// complete reports whether the recorded answer is whole.
func (c *cacheSink) complete() bool {
	if c.stream {
		return cache.Complete(c.body)
	}
	return c.length < 0 || int64(len(c.body)) == c.length
}

// drop stops recording and gives back what the recording held.
func (c *cacheSink) drop() {
	if c.recording {
		c.cache.release(len(c.body))
		c.recording, c.body = false, c.body[:0]
	}
}
