// Package cache keeps whole successful answers to inference requests, to serve an identical
// request again without a model: the key that names an answer, the entry that holds it, and
// two stores (this process's memory, or Redis shared by every node). It knows nothing of the
// relay: what may be stored and who may read it are the relay's rules.
package cache

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"net/http"
	"sync"
	"time"
)

// Request is everything that shapes an answer, and whose answer it is.
type Request struct {
	// Tenant owns the entry: the client key's id, or the pool that serves the request when
	// it has no key. Tenants never share an entry: the tenant is hashed and names the
	// entry's namespace too.
	Tenant string
	Route  string // the path called, with its query (the target gets both)
	Model  string // the model asked for
	Stream bool
	Meta   bool // the answer carries x_pool_meta
	Body   []byte
	// Omit is the part of Body that does not shape the answer (x_pool_options), left out
	// of the hash; {0, 0} when there is none.
	Omit [2]int
}

// Key names one entry.
type Key struct {
	Tenant string
	Sum    [sha256.Size]byte
}

// String is the key's name in a shared store: the tenant, then the hash.
func (k Key) String() string {
	return k.Tenant + ":" + hex.EncodeToString(k.Sum[:])
}

// maxPooledBuffer bounds a hashing buffer kept for reuse: a rare large body does not keep
// its buffer alive.
const maxPooledBuffer = 1 << 20

var buffers = sync.Pool{New: func() any { return new([]byte) }}

// Key hashes the request. Every field is written with its length first, so that no two
// requests write the same bytes. The pieces are copied into one buffer and hashed at once:
// the copy costs a fraction of the hash, and sha256.Sum256 allocates nothing.
func (r *Request) Key() Key {
	bp := buffers.Get().(*[]byte)
	b := (*bp)[:0]
	b = appendString(b, r.Tenant)
	b = appendString(b, r.Route)
	b = appendString(b, r.Model)
	var flags byte
	if r.Stream {
		flags |= 1
	}
	if r.Meta {
		flags |= 2
	}
	b = append(b, flags)
	from, to := r.Omit[0], r.Omit[1]
	if from < 0 || to < from || to > len(r.Body) {
		from, to = 0, 0
	}
	b = binary.AppendUvarint(b, uint64(len(r.Body)-(to-from)))
	b = append(append(b, r.Body[:from]...), r.Body[to:]...)
	k := Key{Tenant: r.Tenant, Sum: sha256.Sum256(b)}
	if cap(b) <= maxPooledBuffer {
		*bp = b
		buffers.Put(bp)
	}
	return k
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// Entry is a stored answer. Its status is always 200: nothing else is stored. An entry a
// store returns is shared: read it, never change it.
type Entry struct {
	// Header holds the headers of the answer that describe it: its Content-Type and the
	// relay's own (the model that served, a fallback, a translation). Headers that describe
	// one delivery (the target, the queue time, the length) are not kept.
	Header http.Header
	Body   []byte
	Stream bool      // Body is a server-sent-event stream, replayed event by event
	Stored time.Time // when the answer ended: what Age counts from
}

// size is about what the entry holds in memory.
func (e *Entry) size() int64 {
	n := int64(len(e.Body)) + 64
	for name, values := range e.Header {
		n += int64(len(name)) + 16
		for _, v := range values {
			n += int64(len(v)) + 16
		}
	}
	return n
}

// Store keeps entries. Get and Put never fail the request: a store that cannot answer
// reports a miss, and a Put it cannot make is dropped.
type Store interface {
	// Get returns the live entry under k.
	Get(ctx context.Context, k Key) (*Entry, bool)
	// Put stores e under k for ttl, replacing what was there. The store keeps e: the caller
	// must not change it afterwards.
	Put(ctx context.Context, k Key, e *Entry, ttl time.Duration)
	// Clear removes every entry.
	Clear(ctx context.Context) error
}
