package relay

// weights is the rule that always decides: it picks one of the least loaded (c.least) by
// round robin in seq order after the member chosen last for the model while they all carry
// the same weight and no target of the pool is in slow start; else by smooth weighted round
// robin on the weights now (weightNow), which is what gives a recovering target its growing
// share. Round robin goes by seq, not by the order of the list, so the index needs no merging.
type weights struct{}

func (weights) pick(c *candidates) *member {
	least, cursor := c.least, c.cursor
	if len(least) == 0 {
		return nil
	}
	first, weight := least[0], least[0].weight
	var after tied
	same := true
	for _, e := range least {
		if e.weight != weight {
			same = false
		}
		if e.seq < first.seq {
			first = e
		}
		if e.seq > cursor && (after.m == nil || e.seq < after.seq) {
			after = e
		}
	}
	switch {
	case !same || c.ramping:
		return smoothWeighted(least)
	case after.m != nil:
		return after.m
	}
	return first.m
}

// smoothWeighted is smooth weighted round robin over the tied: each gains its weight now, the
// one ahead is chosen and pays the total back. Its state (swrrCurrent) lives on the members,
// so the sequence carries across requests.
func smoothWeighted(least []tied) *member {
	var chosen *member
	var total float64
	for _, e := range least {
		m := e.m
		w := m.weightNow()
		total += w
		m.swrrCurrent += w
		if chosen == nil || m.swrrCurrent > chosen.swrrCurrent {
			chosen = m
		}
	}
	chosen.swrrCurrent -= total
	return chosen
}
