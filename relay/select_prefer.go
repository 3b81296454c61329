package relay

// preferred is the rule of prefer_gpu: the target the request names, by id or name, gets it
// whenever it is eligible (has room), before any other rule; the first in registration order
// when several answer to the name.
type preferred struct{}

func (preferred) pick(c *candidates) *member {
	want := c.wish.prefer
	if want == "" {
		return nil
	}
	for _, m := range c.served {
		if (m.id == want || m.name == want) && c.eligible(m) {
			return m
		}
	}
	return nil
}
