package relay

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"modelrelay/relay/cache"
	"modelrelay/relay/keys"
)

// This file is the response cache's stage: after admission (a key's rpm still applies) and
// before the chain, a request that uses the cache is answered from it, and a miss's answer is
// recorded on its way to the client (sink_cache.go). The cache is off unless configured, and
// then used only by requests that ask for it (x-modelrelay-cache: use or refresh) or whose key
// or model is configured to use it.

// CacheOptions configure the response cache: off while Store is nil.
type CacheOptions struct {
	Store cache.Store
	TTL   time.Duration // how long an answer is served again (10 m)
	// MaxBytes is the cache's size (256 MiB): an answer larger than cache.MaxEntryBytes of it
	// is not recorded, and the answers being recorded hold at most MaxBytes together.
	MaxBytes int64
	// Models say how requests for a model use the cache: keys.CacheDefault (unless they say
	// otherwise) or keys.CacheOff (never); a model not named, only when they ask.
	Models map[string]string
}

// responseCache is the server's cache: its options and the memory its recordings hold.
type responseCache struct {
	CacheOptions
	maxEntry  int
	recording atomic.Int64 // bytes held by answers being recorded
}

func newResponseCache(o CacheOptions) *responseCache {
	if o.TTL <= 0 {
		o.TTL = 10 * time.Minute
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = 256 << 20
	}
	return &responseCache{CacheOptions: o, maxEntry: int(cache.MaxEntryBytes(o.MaxBytes))}
}

// reserve takes n bytes of the recordings' budget; false means it is spent.
func (c *responseCache) reserve(n int) bool {
	if c.recording.Add(int64(n)) > c.MaxBytes {
		c.recording.Add(-int64(n))
		return false
	}
	return true
}

func (c *responseCache) release(n int) { c.recording.Add(-int64(n)) }

// cacheHeader asks for the cache (use, refresh) and says what it did (hit, miss, skip).
const cacheHeader = "X-Modelrelay-Cache"

// cacheUse is what a request does with the cache.
type cacheUse uint8

const (
	cacheNone  cacheUse = iota // nothing
	cacheRead                  // a hit answers it; a miss's answer is stored
	cacheWrite                 // its answer is stored (refresh), nothing is read
)

// The results counted in modelrelay_cache_requests_total. A request that did not ask for the
// cache (nor its key or model) is not counted.
const (
	cacheHit  = "hit"
	cacheMiss = "miss"
	cacheSkip = "skip" // it asked, but may not use it (see decide)
)

// cacheMetrics registers the cache's series on reg: the requests that asked for it by
// result, each result started at zero, and the failures of its shared store.
func cacheMetrics(s *Server, reg prometheus.Registerer) *prometheus.CounterVec {
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "modelrelay_cache_requests_total",
		Help: "Requests that asked for the response cache (or whose key or model uses it), by result (hit, miss, skip: asked but may not use it).",
	}, []string{"result"})
	for _, result := range []string{cacheHit, cacheMiss, cacheSkip} {
		requests.WithLabelValues(result)
	}
	failures := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "modelrelay_cache_store_failures_total",
		Help: "Calls to the response cache's shared store (Redis) that failed; each was a miss or an answer not stored.",
	}, func() float64 {
		if s.cache == nil {
			return 0
		}
		if c, ok := s.cache.Store.(interface{ Failures() uint64 }); ok {
			return float64(c.Failures())
		}
		return 0
	})
	reg.MustRegister(requests, failures)
	return requests
}

var errCacheHeader = badRequest("x-modelrelay-cache must be use or refresh")

// decide says how a request uses the cache, and what to count ("" when it did not ask for
// it). A request asks with its header, or through its key's or model's default. It skips the
// cache when its key or model is configured off, when it sends Cache-Control: no-store, and
// when it samples (temperature above 0 without a seed: its answers differ from call to call)
// unless its header says use.
func (c *responseCache) decide(h http.Header, key *keys.Key, model string, sampled bool) (cacheUse, string, error) {
	asked := strings.ToLower(strings.TrimSpace(h.Get(cacheHeader)))
	if asked != "" && asked != "use" && asked != "refresh" {
		return cacheNone, "", errCacheHeader
	}
	keyUse := ""
	if key != nil {
		keyUse = key.Cache
	}
	modelUse := c.Models[model]
	if asked == "" && keyUse != keys.CacheDefault && modelUse != keys.CacheDefault {
		return cacheNone, "", nil
	}
	if keyUse == keys.CacheOff || modelUse == keys.CacheOff || noStore(h) || (sampled && asked != "use") {
		return cacheNone, cacheSkip, nil
	}
	if asked == "refresh" {
		return cacheWrite, cacheMiss, nil
	}
	return cacheRead, "", nil
}

// sampled reports whether the body asks for answers that differ from call to call:
// temperature above 0, and no seed.
func (v *bodyView) sampled(body []byte) bool {
	if v.temperature.to == 0 {
		return false
	}
	t, err := strconv.ParseFloat(string(body[v.temperature.from:v.temperature.to]), 64)
	return err == nil && t > 0 && (v.seed.to == 0 || !given(body[v.seed.from:v.seed.to]))
}

// noStore reports whether Cache-Control has the no-store directive.
func noStore(h http.Header) bool {
	for _, v := range h.Values("Cache-Control") {
		for d := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(d), "no-store") {
				return true
			}
		}
	}
	return false
}

// tenant is whose entries a request reads and writes: its key's, else the pool's that serves
// it (the circuit of a circuit host). "" when neither is known: the cache is skipped.
func tenant(key *keys.Key, at Placement, model string) string {
	switch {
	case key != nil:
		return "key:" + key.ID
	case at.Pool != "":
		return "pool:" + at.Pool
	case at.ByModel != nil:
		if pools := at.ByModel(model); len(pools) > 0 {
			return "pool:" + pools[0]
		}
	}
	return ""
}

// lookup is the cache stage. It returns true when the request was answered: from the cache,
// or refused for a wrong x-modelrelay-cache. Otherwise a request that uses the cache has its
// answer recorded by out, and carries x-modelrelay-cache: miss (skip when it may not use it).
func (s *Server) lookup(r *http.Request, at Placement, key *keys.Key, asked string, body []byte, v *bodyView, out *answer) bool {
	c := s.cache
	if c == nil {
		return false
	}
	use, result, err := c.decide(r.Header, key, asked, v.sampled(body))
	if err != nil {
		out.client.fail(err)
		return true
	}
	var k cache.Key
	if use != cacheNone {
		if who := tenant(key, at, asked); who == "" {
			use, result = cacheNone, cacheSkip
		} else {
			req := cache.Request{Tenant: who, Route: r.URL.RequestURI(), Model: asked, Stream: v.Stream, Meta: v.options != nil,
				Body: body, Omit: [2]int{v.cut.from, v.cut.to}}
			k = req.Key()
		}
	}
	if use == cacheRead {
		if e, ok := c.Store.Get(r.Context(), k); ok {
			s.metrics.cacheRequests.WithLabelValues(cacheHit).Inc()
			serveCached(out, e)
			return true
		}
		result = cacheMiss
	}
	if result == "" {
		return false
	}
	s.metrics.cacheRequests.WithLabelValues(result).Inc()
	out.client.w.Header().Set(cacheHeader, result)
	if use != cacheNone {
		out.record(context.WithoutCancel(r.Context()), c, k)
	}
	return false
}

// serveCached answers with a stored answer: its headers, with hit and its Age, then its body;
// a stream's events are written one by one, each flushed, as the miss's client received them.
func serveCached(out *answer, e *cache.Entry) {
	h := out.client.w.Header()
	h.Set(cacheHeader, cacheHit)
	h.Set("Age", strconv.FormatInt(max(int64(time.Since(e.Stored)/time.Second), 0), 10))
	length := int64(len(e.Body))
	if e.Stream {
		length = -1
	}
	body, _ := out.client.Head(http.StatusOK, e.Header, length) // the client writer's Head never fails
	if !e.Stream {
		body.Chunk(e.Body, false)
		return
	}
	for ev := range cache.Events(e.Body) {
		if body.Chunk(ev, true) != nil {
			return // the client left, or the stream ceiling ended the answer
		}
	}
}
