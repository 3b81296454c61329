package prefix

import "sync"

// Index remembers, per target, the block hashes the target recently served: a bounded
// recency set per target. It is safe for concurrent use: one lock guards the table of
// targets, and each target's set has its own lock, held for a few map operations at most.
type Index struct {
	half int // entries per generation: a target holds at most 2*half

	mu      sync.RWMutex
	targets map[uint64]*recent
}

// recent is one target's recency set, an approximate LRU of two generations: new and
// re-served hashes go into cur; when cur would pass half the capacity it becomes old and the
// previous old is dropped whole. A hash served again while in old is copied into cur, so it
// survives the next rotation. The dropped generation is cleared after the lock is released
// (clearing 8 Ki entries takes some 15 µs) and kept as the spare that becomes the next cur,
// so a rotation holds the lock no longer than any other Record.
//
// Every Record inserts a whole prompt prefix (blocks 0..n) into one generation, and a
// rotation drops a generation whole, so what a target holds stays closed under prefixes:
// holding block i means holding blocks 0..i. That is what lets Match binary-search.
type recent struct {
	mu       sync.RWMutex
	cur, old map[uint64]struct{}
	spare    map[uint64]struct{} // empty, for the next rotation; nil while being cleared
}

// NewIndex returns an Index that remembers at most perTarget block hashes per target (at
// least 2). Its maps keep room for about 1.5 times that many.
func NewIndex(perTarget int) *Index {
	return &Index{half: max(perTarget/2, 1), targets: make(map[uint64]*recent)}
}

// Record notes that target served a prompt with these blocks. A prompt longer than half the
// per-target capacity is remembered by its leading blocks. Record after Forget for the same
// target starts it afresh, so a caller that records off its own lock, racing the target's
// departure, checks after Record whether the target has gone and then Forgets it again.
func (x *Index) Record(target uint64, blocks []uint64) {
	if len(blocks) == 0 {
		return
	}
	blocks = blocks[:min(len(blocks), x.half)]
	r := x.lookup(target)
	if r == nil {
		r = x.add(target)
	}
	r.mu.Lock()
	// cur is prefix-closed, so the blocks it already holds are a leading run.
	k := leading(r.cur, nil, blocks)
	var dropped map[uint64]struct{}
	if len(r.cur)+len(blocks)-k > x.half {
		dropped = r.old
		r.old, r.cur, r.spare = r.cur, r.spare, nil
		if r.cur == nil { // the last spare is still being cleared
			r.cur = make(map[uint64]struct{})
		}
		k = 0
	}
	for _, h := range blocks[k:] {
		r.cur[h] = struct{}{}
	}
	r.mu.Unlock()
	if dropped != nil {
		clear(dropped)
		r.mu.Lock()
		if r.spare == nil {
			r.spare = dropped
		}
		r.mu.Unlock()
	}
}

// Match returns how many leading blocks target holds.
func (x *Index) Match(target uint64, blocks []uint64) int {
	r := x.lookup(target)
	if r == nil {
		return 0
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return leading(r.cur, r.old, blocks)
}

// Forget drops everything remembered of target (it left the pool).
func (x *Index) Forget(target uint64) {
	x.mu.Lock()
	delete(x.targets, target)
	x.mu.Unlock()
}

func (x *Index) lookup(target uint64) *recent {
	x.mu.RLock()
	r := x.targets[target]
	x.mu.RUnlock()
	return r
}

func (x *Index) add(target uint64) *recent {
	x.mu.Lock()
	defer x.mu.Unlock()
	r := x.targets[target]
	if r == nil {
		r = &recent{cur: make(map[uint64]struct{}), old: make(map[uint64]struct{})}
		x.targets[target] = r
	}
	return r
}

// leading returns the length of the longest run of leading blocks found in a or b, by binary
// search: the sets are prefix-closed, so the blocks held form a leading run.
func leading(a, b map[uint64]struct{}, blocks []uint64) int {
	lo, hi := 0, len(blocks) // blocks[:lo] are held; blocks[hi:] are not
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		h := blocks[mid]
		_, ok := a[h]
		if !ok {
			_, ok = b[h]
		}
		if ok {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}
