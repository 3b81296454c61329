package relay

// loadBound is what session affinity and prefix placement may cost in balance: a target may
// win for what its cache holds while its load is at most the lowest load + its slack.
type loadBound struct {
	slack int // the configured affinity_slack, or slackPerTarget when none was
}

// slackPerTarget marks a bound without a configured affinity_slack: each target's slack is a
// quarter of its own max_concurrent, at least minSlack.
const slackPerTarget = -1

// minSlack is the least default slack, and all of it for a target without a cap.
const minSlack = 2

// newLoadBound is the bound for Scheduling.AffinitySlack: 0 = not configured (per target),
// negative = none (the lowest load only), else that many.
func newLoadBound(configured int) loadBound {
	switch {
	case configured == 0:
		return loadBound{slack: slackPerTarget}
	case configured < 0:
		return loadBound{}
	}
	return loadBound{slack: configured}
}

// admits reports whether m is within the bound of lowest.
func (b loadBound) admits(m *member, lowest float64) bool {
	return m.load() <= lowest+b.slackOf(m)
}

// slackOf is m's slack. The default belongs to the target being considered, not to the pool:
// a target that batches many streams absorbs a few more of them in its stride, and one
// running 32 is still far from full 8 above the least loaded, where one with 4 slots would
// be full at 2 (a pool-wide slack from its largest member would lift the bound off the small
// ones altogether). Read from the target itself, it needs no pool state and follows
// max_concurrent when a circuit's update changes it.
func (b loadBound) slackOf(m *member) float64 {
	if b.slack != slackPerTarget {
		return float64(b.slack)
	}
	return float64(max(minSlack, m.maxConcurrent/4))
}
