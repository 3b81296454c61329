package main

import (
	"strings"
	"testing"
	"time"
)

func TestOwnStagesInfoLine(t *testing.T) {
	// CPU per 1k requests = CPU × 1000 / requests: 1000 requests make CPU the figure itself.
	row := func(name string, cpu time.Duration) RowResult {
		return RowResult{Target: Target{Row: name, PIDs: []int{1}}, CPU: cpu, Load: LoadResult{Requests: 1000}}
	}
	both := summarize([]RowResult{
		row(floorNetHTTP.row, 75*time.Millisecond), row(floorLean.row, 62*time.Millisecond),
		row(relayStatic.row, 103*time.Millisecond), row(relayStaticLean.row, 87*time.Millisecond),
	})
	want := "- [info] relay's own stages: relay static 103 − floor (net/http) 75 = 28 ms CPU per 1k requests " +
		"(27% of its CPU); relay static (lean) 87 − floor (lean) 62 = 25 (29%)\n"
	if got := both.TargetsMarkdown(); !strings.Contains(got, want) {
		t.Errorf("targets lack\n%s\nin\n%s", want, got)
	}

	// One pair whole: only it, with the units. A skipped floor row leaves its pair out.
	lean := summarize([]RowResult{
		{Target: Target{Row: floorNetHTTP.row}, Skipped: "did not start"}, row(floorLean.row, 62*time.Millisecond),
		row(relayStatic.row, 103*time.Millisecond), row(relayStaticLean.row, 87*time.Millisecond),
	})
	want = "- [info] relay's own stages: relay static (lean) 87 − floor (lean) 62 = 25 ms CPU per 1k requests " +
		"(29% of its CPU)\n"
	if got := lean.TargetsMarkdown(); !strings.Contains(got, want) {
		t.Errorf("targets lack\n%s\nin\n%s", want, got)
	}

	// No pair whole: no line at all (not an n/a).
	none := summarize([]RowResult{row(floorNetHTTP.row, 75*time.Millisecond), row(relayStaticLean.row, 87*time.Millisecond)})
	if got := none.TargetsMarkdown(); strings.Contains(got, "own stages") {
		t.Errorf("targets print the relay's own stages with no pair measured:\n%s", got)
	}
}
