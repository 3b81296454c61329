package relay

// eligible is the rule of eligibility: m may take the request now when it is available (not
// draining, not gone or suspect, below its concurrency cap, its breaker admitting: a target in
// slow start is eligible, slow start only shapes its share in weights) and is not the target
// a retry must not return to.
func (c *candidates) eligible(m *member) bool {
	return m != c.avoid && m.available()
}

// gather sets c to served, the members that serve the model, with avoid, and applies the rule
// of least load to the eligible among them: c.lowest is the lowest load, c.least the ones at
// it. Load is in flight per unit of weight for upstreams and the larger of reported and in
// flight for workers (member.load).
//
// Only the least loaded are kept: the rules that look further (the wishes) serve some
// requests only and walk served again, so the pass every request takes writes little
// (keeping every eligible member with its load cost a quarter more instructions per
// selection with a thousand targets).
func (c *candidates) gather(served []*member, avoid *member) {
	c.served, c.avoid = served, avoid
	least, lowest := c.least[:0], 0.0 // locals: through c, every append reloads them
	for _, m := range served {
		if m == avoid || !m.available() { // eligible, on locals
			continue
		}
		l := m.load()
		if len(least) > 0 {
			if l > lowest {
				continue
			}
			if l < lowest {
				least = least[:0]
			}
		}
		lowest, least = l, append(least, tied{m: m, seq: m.seq, weight: m.weight})
	}
	c.least, c.lowest = least, lowest
}
