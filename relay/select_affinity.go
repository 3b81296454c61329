package relay

// affinity is the rule of session affinity: a session returns to the target that served it
// last while that target is eligible and within the load bound; else the session goes where
// the rules after it say (and moves there).
type affinity struct {
	bound loadBound
}

func (a affinity) pick(c *candidates) *member {
	if !c.wish.hasSession {
		return nil
	}
	for _, m := range c.served {
		if m.seq == c.wish.session {
			if c.eligible(m) && a.bound.admits(m, c.lowest) {
				return m
			}
			return nil
		}
	}
	return nil
}
