package prefix

import (
	"runtime"
	"sync"
	"testing"
)

func (x *Index) entries(target uint64) int {
	r := x.lookup(target)
	if r == nil {
		return 0
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.cur) + len(r.old)
}

func TestIndexMatch(t *testing.T) {
	x := NewIndex(4096)
	p := randomBlocks(1, 100)
	x.Record(7, p[:60])
	for _, tc := range []struct {
		name   string
		target uint64
		blocks []uint64
		want   int
	}{
		{"the prompt recorded", 7, p[:60], 60},
		{"its next turn", 7, p, 60},
		{"an earlier turn", 7, p[:25], 25},
		{"a prompt sharing 10 blocks", 7, append(append([]uint64{}, p[:10]...), randomBlocks(2, 50)...), 10},
		{"another prompt", 7, randomBlocks(3, 60), 0},
		{"no blocks", 7, nil, 0},
		{"another target", 8, p, 0},
	} {
		if got := x.Match(tc.target, tc.blocks); got != tc.want {
			t.Errorf("%s: match %d, want %d", tc.name, got, tc.want)
		}
	}
	x.Record(7, p)
	if got := x.Match(7, p); got != 100 {
		t.Errorf("after recording the next turn: match %d, want 100", got)
	}
}

// Match agrees with counting leading blocks one by one, whatever was recorded and evicted.
func TestIndexMatchIsALinearScan(t *testing.T) {
	x := NewIndex(300)
	var prompts [][]uint64
	for i := range 40 {
		// Conversations that grow turn by turn and share system prompts.
		base := randomBlocks(uint64(i%5), 30)
		p := append(append([]uint64{}, base[:10+i%20]...), randomBlocks(uint64(100+i), i%30)...)
		prompts = append(prompts, p)
		x.Record(1, p)
		for _, q := range prompts {
			if got, want := x.Match(1, q), linearMatch(x, 1, q); got != want {
				t.Fatalf("after %d records: match %d, linear %d", i+1, got, want)
			}
		}
	}
}

func linearMatch(x *Index, target uint64, blocks []uint64) int {
	r := x.lookup(target)
	n := 0
	for _, h := range blocks {
		_, a := r.cur[h]
		_, b := r.old[h]
		if !a && !b {
			break
		}
		n++
	}
	return n
}

// However much is recorded, a target holds at most its capacity, and what it served last is
// what it holds.
func TestIndexBound(t *testing.T) {
	const perTarget = 1000
	x := NewIndex(perTarget)
	var last []uint64
	for i := range 5000 {
		last = randomBlocks(uint64(i), 1+i%120)
		x.Record(1, last)
		if n := x.entries(1); n > perTarget {
			t.Fatalf("after %d records: %d entries, bound %d", i+1, n, perTarget)
		}
		if x.Match(1, last) != len(last) {
			t.Fatalf("record %d: the prompt just served is not held", i)
		}
	}
	if x.Match(1, randomBlocks(0, 1)) != 0 {
		t.Fatal("the first prompt survived 5000 others")
	}
	// A prompt longer than half the capacity is held by its leading blocks.
	small := NewIndex(64)
	long := randomBlocks(9, MaxBlocks)
	small.Record(1, long)
	if got := small.Match(1, long); got != 32 {
		t.Fatalf("a 256-block prompt in a 64-entry index matches %d, want 32", got)
	}
}

// A conversation served again and again stays held while other traffic churns through.
func TestIndexKeepsWhatIsServedAgain(t *testing.T) {
	x := NewIndex(2000)
	hot := randomBlocks(1, 50)
	for i := range 2000 {
		x.Record(1, randomBlocks(uint64(1000+i), 20))
		if i%10 == 0 {
			x.Record(1, hot)
		}
	}
	if got := x.Match(1, hot); got != 50 {
		t.Fatalf("a conversation served every 10 requests matches %d blocks, want 50", got)
	}
}

// Memory stays bounded: recording a million prompts over a few targets grows nothing past
// what the first round of rotations allocated.
func TestIndexMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates")
	}
	x := NewIndex(4096)
	prompt := make([]uint64, 64)
	seq := uint64(0)
	round := func(n int) {
		for range n {
			for i := range prompt {
				seq++
				prompt[i] = seq * 0x9e3779b97f4a7c15
			}
			x.Record(seq%4, prompt)
		}
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	round(2000)
	before := heap()
	round(20000)
	after := heap()
	if after > before+before/4+(1<<20) {
		t.Fatalf("heap grew from %d to %d bytes over 20000 more records", before, after)
	}
	for target := range uint64(4) {
		if n := x.entries(target); n > 4096 {
			t.Fatalf("target %d holds %d entries", target, n)
		}
	}
}

func TestIndexForget(t *testing.T) {
	x := NewIndex(100)
	p := randomBlocks(1, 10)
	x.Record(1, p)
	x.Record(2, p)
	x.Forget(1)
	if x.Match(1, p) != 0 || x.Match(2, p) != 10 {
		t.Fatalf("after Forget(1): %d, %d; want 0, 10", x.Match(1, p), x.Match(2, p))
	}
	x.Forget(3) // unknown: nothing happens
	x.Record(1, p)
	if x.Match(1, p) != 10 {
		t.Fatal("a target recorded again after Forget starts afresh")
	}
}

func TestIndexConcurrent(t *testing.T) {
	x := NewIndex(500)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				p := randomBlocks(uint64(g*10000+i%50), 1+i%40)
				target := uint64(i % 3)
				x.Record(target, p)
				if m := x.Match(target, p); m > len(p) {
					t.Errorf("match %d of %d", m, len(p))
				}
				if i%500 == 0 {
					x.Forget(target)
				}
			}
		})
	}
	wg.Wait()
}
