package main

import (
	"fmt"
	"strings"
)

// rowSpec is one row of the table, in table order, with the short name -only takes.
type rowSpec struct {
	key, row string
	start    func(b *Bench, opts Options) (Target, error)
}

var rowSpecs = []rowSpec{
	{key: "direct", row: "direct", start: func(b *Bench, _ Options) (Target, error) {
		return Target{Row: "direct", Addr: b.upstream}, nil
	}},
	{key: "nginx", row: "nginx", start: func(b *Bench, _ Options) (Target, error) { return b.startProxy(publicProxies[0]) }},
	{key: "haproxy", row: "HAProxy", start: func(b *Bench, _ Options) (Target, error) { return b.startProxy(publicProxies[1]) }},
	{key: "caddy", row: "Caddy", start: func(b *Bench, _ Options) (Target, error) { return b.startProxy(publicProxies[2]) }},
	{key: "portkey", row: "Portkey", start: func(b *Bench, _ Options) (Target, error) { return b.startPortkey() }},
	{key: "floor", row: floorNetHTTP.row, start: func(b *Bench, _ Options) (Target, error) { return b.startFloor(floorNetHTTP) }},
	{key: "floor-lean", row: floorLean.row, start: func(b *Bench, _ Options) (Target, error) { return b.startFloor(floorLean) }},
	{key: "static", row: relayStatic.row, start: func(b *Bench, o Options) (Target, error) { return b.startRelayStatic(relayStatic, o.Pprof) }},
	{key: "static-lean", row: relayStaticLean.row, start: func(b *Bench, o Options) (Target, error) {
		return b.startRelayStatic(relayStaticLean, o.Pprof)
	}},
	{key: "circuit", row: "relay circuit", start: func(b *Bench, _ Options) (Target, error) { return b.startRelayCircuit() }},
	{key: "worker", row: "relay worker", start: func(b *Bench, o Options) (Target, error) { return b.startRelayWorker(workerSlots, o.Pprof) }},
}

// staticSetup is one static row: its name in the tables, its process's (and log's and temp
// dir's) name, and the http_server it runs.
type staticSetup struct{ row, name, server string }

// The static row runs the relay's default server, net/http's; the static-lean row runs the
// same config on the relay's own lean HTTP/1.1 server (http_server: lean), measured beside it.
var (
	relayStatic     = staticSetup{row: "relay static", name: "relay-static", server: "net/http"}
	relayStaticLean = staticSetup{row: "relay static (lean)", name: "relay-static-lean", server: "lean"}
)

// workerSlots is the worker daemon's --max-concurrency in the main table: above the 64
// connections and 200 streams it is driven with, so the daemon never queues.
const workerSlots = 256

// selectRows turns -only into the rows to run. The direct row always runs: every ratio is
// taken against it.
func selectRows(only string) ([]rowSpec, error) {
	if strings.TrimSpace(only) == "" {
		return rowSpecs, nil
	}
	want := map[string]bool{"direct": true}
	for _, name := range strings.Split(only, ",") {
		name = strings.ToLower(strings.TrimSpace(name))
		if name == "" {
			continue
		}
		known := false
		for _, r := range rowSpecs {
			if name == r.key || name == strings.ToLower(r.row) {
				want[r.key], known = true, true
			}
		}
		if !known {
			return nil, fmt.Errorf("-only: unknown row %q (rows: %s)", name, rowKeys())
		}
	}
	var out []rowSpec
	for _, r := range rowSpecs {
		if want[r.key] {
			out = append(out, r)
		}
	}
	return out, nil
}

// rowKeys lists the rows by -only key, in table order.
func rowKeys() string {
	keys := make([]string, len(rowSpecs))
	for i, r := range rowSpecs {
		keys[i] = r.key
	}
	return strings.Join(keys, ", ")
}
