package relay

import "modelrelay/relay/prefix"

// prefixMatch is the rule of cache-aware placement for a request without a remembered
// session: among the eligible targets within the load bound, the one that recently served the
// longest prefix of the prompt wins, when that covers at least minMatch of the prompt's
// blocks; equal matches go to the lower load, then round robin after the cursor. A prefix
// every target holds (a shared system prompt) ties everywhere, so it never pulls all traffic
// to one target.
type prefixMatch struct {
	index    *prefix.Index
	bound    loadBound
	minMatch float64
}

func (r prefixMatch) pick(c *candidates) *member {
	blocks := c.wish.blocks
	if len(blocks) == 0 {
		return nil
	}
	var held *member
	best := 0
	for _, m := range c.served {
		if !c.eligible(m) || !r.bound.admits(m, c.lowest) {
			continue
		}
		n := r.index.Match(m.seq, blocks)
		if n == 0 || n < best {
			continue
		}
		if n > best || m.load() < held.load() || (m.load() == held.load() && rrBefore(m.seq, held.seq, c.cursor)) {
			held, best = m, n
		}
	}
	if held != nil && float64(best) >= r.minMatch*float64(len(blocks)) {
		return held
	}
	return nil
}

// rrBefore says whether seq a comes before seq b in round-robin order after cursor.
func rrBefore(a, b, cursor uint64) bool {
	if (a > cursor) != (b > cursor) {
		return a > cursor
	}
	return a < b
}
