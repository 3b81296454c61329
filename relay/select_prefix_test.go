package relay

import (
	"fmt"
	"testing"

	"modelrelay/relay/prefix"
)

// prefixMatch: among eligible targets within the load bound, the longest match of the
// prompt's blocks wins when it covers minMatch of them; equal matches go to the lower load,
// then round robin after the cursor.
func TestPrefixMatch(t *testing.T) {
	prompt := []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	cases := []struct {
		name   string
		held   []int // blocks of the prompt each of w1, w2, w3 holds (a leading run)
		loads  []int
		cursor uint64
		slack  int
		want   string
	}{
		{"nobody holds it", []int{0, 0, 0}, []int{0, 0, 0}, 0, 2, ""},
		{"the longest match wins", []int{4, 8, 6}, []int{0, 1, 0}, 0, 2, "w2"},
		{"a match below prefix_min_match is not enough", []int{2, 0, 0}, []int{0, 0, 0}, 0, 2, ""},
		{"exactly prefix_min_match is enough", []int{3, 0, 0}, []int{0, 0, 0}, 0, 2, "w1"},
		{"the longest match past the bound gives way to the next", []int{4, 8, 6}, []int{0, 3, 0}, 0, 2, "w3"},
		{"equal matches: the lower load", []int{6, 6, 6}, []int{2, 1, 2}, 0, 2, "w2"},
		{"equal matches and loads: round robin after the cursor", []int{6, 6, 6}, []int{1, 1, 1}, 1, 2, "w2"},
		{"round robin wraps", []int{6, 6, 0}, []int{0, 0, 0}, 2, 2, "w1"},
		{"without room", []int{8, 4, 0}, []int{4, 0, 0}, 0, 8, "w2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			index := prefix.NewIndex(1024)
			var served []*member
			for i, l := range c.loads {
				served = append(served, worker(fmt.Sprint("w", i+1), 4, l, "m"))
			}
			served = numbered(served...)
			for i, n := range c.held {
				index.Record(served[i].seq, prompt[:n])
			}
			cs := gathered(served, nil)
			cs.cursor = c.cursor
			cs.wish = wish{blocks: prompt}
			rule := prefixMatch{index: index, bound: loadBound{slack: c.slack}, minMatch: 0.3}
			if got := idOf(rule.pick(cs)); got != c.want {
				t.Fatalf("picked %q, want %q", got, c.want)
			}
		})
	}
}

// rrBefore orders seqs as round robin after cursor visits them.
func TestRRBefore(t *testing.T) {
	for _, c := range []struct {
		a, b, cursor uint64
		want         bool
	}{
		{2, 3, 1, true}, {3, 2, 1, false}, {3, 1, 2, true}, {1, 3, 2, false}, {1, 2, 5, true}, {2, 2, 0, false},
	} {
		if got := rrBefore(c.a, c.b, c.cursor); got != c.want {
			t.Errorf("rrBefore(%d, %d, after %d) = %v, want %v", c.a, c.b, c.cursor, got, c.want)
		}
	}
}
