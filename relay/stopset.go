package relay

import (
	"sync"
	"sync/atomic"
)

// stopSet is the calls being served, each by its context, so that a hard stop
// (the drain deadline passing, Close) ends them all. A request registers when it starts and
// leaves when it ends: an entry in a map under a lock, where a context.AfterFunc on one
// server-wide stop context cost two allocations and about 2,000 instructions a request. The
// entries are spread over shards by key, each under its own lock, so that no lock is taken by
// every request.
type stopSet struct {
	next   atomic.Uint64
	shards [stopShards]stopShard
}

const stopShards = 16

type stopShard struct {
	mu      sync.Mutex
	calls   map[uint64]*callCtx
	stopped error    // why the set was stopped; nil while serving
	_       [32]byte // the rest of a 64-byte cache line: neighbours' locks do not share one
}

func (s *stopSet) shard(key uint64) *stopShard { return &s.shards[key%stopShards] }

// add registers call and returns its key for remove. After stop, call is ended at once with
// the stop's cause and nothing is kept.
func (s *stopSet) add(call *callCtx) uint64 {
	key := s.next.Add(1)
	sh := s.shard(key)
	sh.mu.Lock()
	if err := sh.stopped; err != nil {
		sh.mu.Unlock()
		call.end(err)
		return 0
	}
	if sh.calls == nil {
		sh.calls = make(map[uint64]*callCtx)
	}
	sh.calls[key] = call
	sh.mu.Unlock()
	return key
}

// remove forgets the request registered under key (0, or a key already gone: nothing).
func (s *stopSet) remove(key uint64) {
	if key == 0 {
		return
	}
	sh := s.shard(key)
	sh.mu.Lock()
	delete(sh.calls, key)
	sh.mu.Unlock()
}

// stop ends every registered request, and every one registered later, with cause. Only the
// first call's cause counts. A request registers in one shard, so it is ended either by
// add (its shard was stopped already) or here (it was there when stop reached its shard).
func (s *stopSet) stop(cause error) {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		if sh.stopped != nil {
			sh.mu.Unlock()
			continue
		}
		sh.stopped = cause
		calls := sh.calls
		sh.calls = nil
		sh.mu.Unlock()
		for _, call := range calls {
			call.end(cause)
		}
	}
}
