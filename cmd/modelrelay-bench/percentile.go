package main

import (
	"slices"
	"time"
)

// percentile returns the p-th percentile (0..100) of samples by the nearest-rank method,
// or 0 when there are none. It sorts samples in place.
func percentile(samples []time.Duration, p float64) time.Duration {
	if len(samples) == 0 {
		return 0
	}
	slices.Sort(samples)
	rank := int(p/100*float64(len(samples))+0.999999) - 1
	rank = max(0, min(rank, len(samples)-1))
	return samples[rank]
}
