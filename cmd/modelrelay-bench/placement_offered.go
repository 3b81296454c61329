package main

import (
	"fmt"
	"slices"
	"time"
)

// How close a policy ran its replicas to prefill saturation. Each replica prefills one block
// at a time, so its capacity is one second of prefill per second; the offered load is the
// prefill work that reached the replicas (at the policy's own hit ratio) over that capacity.
// A load above 100% for long means queues that only grow; the placement goals are only
// meaningful at a load the baseline can sustain.

// offeredWindow is the span over which the peak offered load is taken: a few prefills of a
// long prompt, short enough to see the schedule's busiest stretch, long enough not to count
// one burst of arrivals as saturation.
const offeredWindow = 5 * time.Second

// offeredLoad is prefill work over the replicas' capacity: mean is over the arrival period
// (first prefill queued to last), peak over the busiest offeredWindow.
type offeredLoad struct {
	mean, peak float64
}

// offeredPrefill computes the offered load of spans (every replica's, in any order) on
// replicas replicas.
func offeredPrefill(spans []prefillSpan, replicas int, window time.Duration) offeredLoad {
	if len(spans) == 0 || replicas < 1 || window <= 0 {
		return offeredLoad{}
	}
	spans = slices.Clone(spans)
	slices.SortFunc(spans, func(a, b prefillSpan) int { return a.at.Compare(b.at) })
	var total, inWindow, most time.Duration
	lo := 0
	for _, s := range spans {
		total += s.d
		inWindow += s.d
		for !spans[lo].at.After(s.at.Add(-window)) {
			inWindow -= spans[lo].d
			lo++
		}
		most = max(most, inWindow)
	}
	capacity := func(d time.Duration) float64 { return float64(replicas) * d.Seconds() }
	period := max(spans[len(spans)-1].at.Sub(spans[0].at), window)
	return offeredLoad{mean: total.Seconds() / capacity(period), peak: most.Seconds() / capacity(window)}
}

func (l offeredLoad) String() string {
	return fmt.Sprintf("%.0f%% / %.0f%%", 100*l.mean, 100*l.peak)
}
