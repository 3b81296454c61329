package relay

// loadBound is what session affinity and prefix placement may cost in balance: a candidate
// may win for what its cache holds while its load is at most the lowest load + the slack.
type loadBound struct {
	slack int // affinity_slack
}

// admits reports whether m is within the bound of lowest.
func (b loadBound) admits(m *member, lowest float64) bool {
	return m.load() <= lowest+float64(b.slack)
}
