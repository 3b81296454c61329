package main

// The floor rows: floorproxy (cmd/modelrelay-bench/floorproxy), a featureless proxy built from
// the relay's own parts (relay/h1's client, and the static row's HTTP server), in a process of
// its own like every other row. What a relay static row costs beyond the floor row on the same
// server is the relay's own stages (routing, JSON, metrics, …); the Targets section prints it.

import (
	"fmt"
	"math"
	"strings"
)

// floorSetup is one floor row: its name in the tables, its process's (and log's) name, the
// HTTP server it runs, and the relay static row on that same server it is the floor of.
type floorSetup struct{ row, name, server, relayRow string }

var (
	floorNetHTTP = floorSetup{row: "floor (net/http)", name: "floor", server: "net/http", relayRow: relayStatic.row}
	floorLean    = floorSetup{row: "floor (lean)", name: "floor-lean", server: "lean", relayRow: relayStaticLean.row}
)

// startFloor runs floorproxy in front of the fake upstream on setup's server.
func (b *Bench) startFloor(setup floorSetup) (Target, error) {
	listen, err := FreePort()
	if err != nil {
		return Target{}, err
	}
	cmd, err := b.children.Start(setup.name, nil, b.bins.floor,
		"-listen", listen, "-upstream", b.upstream, "-server", setup.server)
	if err != nil {
		return Target{}, err
	}
	t := Target{Row: setup.row, Addr: listen, PIDs: []int{cmd.Process.Pid},
		Note: fmt.Sprintf("%s: floorproxy, a featureless Go proxy of relay/h1's client on the %s server; %s minus it "+
			"is the relay's own stages", setup.row, setup.server, setup.relayRow),
		stop: func() { b.children.Stop(cmd) }}
	if err := waitCompletion(b, t); err != nil {
		t.Stop()
		return Target{}, fmt.Errorf("%s not serving (see %s.log in %s): %w", setup.row, setup.name, b.tmp, err)
	}
	return t, nil
}

// ownStages is the information line of the Targets section: for each relay static row measured
// with its floor row, relay static − floor in CPU per 1k non-streaming requests, and that as a
// share of the relay row's CPU. Empty when no pair ran whole.
func (s Summary) ownStages() string {
	var parts []string
	for _, f := range []floorSetup{floorNetHTTP, floorLean} {
		relay, floor := s.Row(f.relayRow), s.Row(f.row)
		if relay == nil || floor == nil {
			continue
		}
		// Rounded first, so the subtraction printed adds up.
		rc, fc := math.Round(us(relay.CPUPer1k())/1000), math.Round(us(floor.CPUPer1k())/1000)
		unit, share := "", "n/a"
		if len(parts) == 0 {
			unit = " ms CPU per 1k requests"
		}
		if rc > 0 {
			share = fmt.Sprintf("%.0f%%", (rc-fc)/rc*100)
		}
		if len(parts) == 0 {
			share += " of its CPU"
		}
		parts = append(parts, fmt.Sprintf("%s %.0f − %s %.0f = %.0f%s (%s)", f.relayRow, rc, f.row, fc, rc-fc, unit, share))
	}
	if len(parts) == 0 {
		return ""
	}
	return "relay's own stages: " + strings.Join(parts, "; ")
}
