package relay

import (
	"strconv"
	"testing"
)

// TestBoundSeries: a label set is bound on its first use and never again, and past maxBound
// label sets the vector is asked each time.
func TestBoundSeries(t *testing.T) {
	asked := map[string]int{}
	var b bound[string, string]
	b.bind = func(l string) string { asked[l]++; return "series " + l }
	first, again := b.get("a"), b.get("a")
	if first != "series a" || again != "series a" || asked["a"] != 1 {
		t.Fatalf("label set a asked of the vector %d times, want once", asked["a"])
	}
	if len(asked) != 1 {
		t.Fatalf("%d label sets bound before their use, want 1", len(asked))
	}
	for i := range maxBound + 10 {
		b.get(strconv.Itoa(i))
	}
	if n := len(*b.seen.Load()); n != maxBound {
		t.Fatalf("%d label sets bound, want %d", n, maxBound)
	}
	last := strconv.Itoa(maxBound + 9)
	if b.get(last) != "series "+last || asked[last] != 2 {
		t.Fatalf("label set past the bound asked %d times, want 2 (every use)", asked[last])
	}
}
