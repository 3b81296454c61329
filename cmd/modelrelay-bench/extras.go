package main

// The tables printed after the main one: streaming CPU per chunk (from the main table's SSE
// rounds), added latency at concurrency 1, and memory per held idle stream. Each states the
// issue's goal beside the figure and whether this run met it.

import (
	"fmt"
	"strings"
	"time"
)

// The goals for these tables.
const (
	goalChunkStatic = 1.3 // relay static CPU per chunk, × nginx
	goalChunkWorker = 2.0 // relay worker (server + daemon) CPU per chunk, × nginx
	goalAddedP50    = 30 * time.Microsecond
	goalAddedP99    = 100 * time.Microsecond
	goalHeldKB      = 25.0 // KB (1,024 bytes) of RSS per held idle stream, relay rows
	goalHeldWorker  = 35.0 // the same for relay worker, whose streams pass two processes
)

// Extras are the measurements behind the extra tables; a nil slice is a scenario not run.
type Extras struct {
	Latency  []LatencyResult
	Held     []HeldResult
	HeldNote string // why fewer streams were held than -held asked, when so
}

func isRelay(row string) bool { return strings.HasPrefix(row, "relay ") }

// verdict compares got with an upper bound, in the figure's own unit (format renders it).
func verdict(got, bound float64, format string) string {
	if got <= bound {
		return "met (" + fmt.Sprintf(format, bound-got) + " to spare)"
	}
	return "missed by " + fmt.Sprintf(format, got-bound)
}

// ChunkCPUMarkdown is the streaming table: proxy CPU during the SSE rounds per chunk delivered.
func (s Summary) ChunkCPUMarkdown() string {
	var b strings.Builder
	b.WriteString("| row | chunks | CPU during SSE | CPU µs / chunk | × nginx | goal | result |\n" +
		"|---|--:|--:|--:|--:|---|---|\n")
	nginx := s.Row("nginx")
	for _, r := range liveRows(s.Rows) {
		if len(r.Target.PIDs) == 0 {
			continue // direct: no proxy
		}
		per := us(r.CPUPerChunk())
		times, goal, result := "n/a", "—", "—"
		bound := map[string]float64{relayStatic.row: goalChunkStatic, relayStaticLean.row: goalChunkStatic,
			"relay worker": goalChunkWorker}[r.Target.Row]
		if nginx != nil && nginx.CPUPerChunk() > 0 {
			x := per / us(nginx.CPUPerChunk())
			times = fmt.Sprintf("%.2f×", x)
			if r.Target.Row == "nginx" {
				goal = "(baseline)"
			}
			if bound > 0 {
				result = verdict(x, bound, "%.2f×")
			}
		} else if bound > 0 {
			result = "n/a (no nginx row)"
		}
		if bound > 0 {
			goal = fmt.Sprintf("≤ %.1f× nginx", bound)
		}
		fmt.Fprintf(&b, "| %s | %d | %.0f ms | %.1f | %s | %s | %s |\n", r.Target.Row, r.SSE.Chunks,
			float64(r.SSECPU)/float64(time.Millisecond), per, times, goal, result)
	}
	return b.String()
}

// LatencyMarkdown is the concurrency-1 table; the direct row is the baseline.
func LatencyMarkdown(rows []LatencyResult) string {
	var direct *LatencyResult
	for i := range rows {
		if rows[i].Row == "direct" && len(rows[i].Samples) > 0 {
			direct = &rows[i]
		}
	}
	var b strings.Builder
	b.WriteString("| row | requests | p50 | p99 | added p50 | added p99 | goal | result |\n" +
		"|---|--:|--:|--:|--:|--:|---|---|\n")
	for _, r := range rows {
		count := fmt.Sprintf("%d", len(r.Samples))
		if r.Errors > 0 {
			count += fmt.Sprintf(" (+%d failed)", r.Errors)
		}
		added50, added99, goal, result := "—", "—", "—", "—"
		switch {
		case r.Row == "direct":
			added50, added99 = "(baseline)", "(baseline)"
		case direct != nil && len(r.Samples) > 0:
			d50, d99 := r.P50-direct.P50, r.P99-direct.P99
			added50, added99 = fmt.Sprintf("%.0f µs", us(d50)), fmt.Sprintf("%.0f µs", us(d99))
			if isRelay(r.Row) {
				result = "p50 " + verdict(us(d50), us(goalAddedP50), "%.0f µs") +
					"; p99 " + verdict(us(d99), us(goalAddedP99), "%.0f µs")
			}
		case isRelay(r.Row):
			result = "n/a (no direct figures)"
		}
		if isRelay(r.Row) {
			goal = fmt.Sprintf("added p50 ≤ %.0f µs, p99 ≤ %.0f µs", us(goalAddedP50), us(goalAddedP99))
		}
		fmt.Fprintf(&b, "| %s | %s | %.0f µs | %.0f µs | %s | %s | %s | %s |\n", r.Row, count,
			us(r.P50), us(r.P99), added50, added99, goal, result)
	}
	return b.String()
}

// HeldMarkdown is the held idle streams table.
func HeldMarkdown(rows []HeldResult) string {
	var nginx *HeldResult
	for i := range rows {
		if rows[i].Row == "nginx" && rows[i].Skipped == "" {
			nginx = &rows[i]
		}
	}
	var b strings.Builder
	b.WriteString("| row | streams held | RSS idle | RSS held | KB / stream | × nginx | goal | result |\n" +
		"|---|--:|--:|--:|--:|--:|---|---|\n")
	for _, r := range rows {
		if r.Skipped != "" {
			fmt.Fprintf(&b, "| %s | skipped: %s |||||||\n", r.Row, r.Skipped)
			continue
		}
		held := fmt.Sprintf("%d", r.Held)
		if r.Failed > 0 {
			held = fmt.Sprintf("%d of %d", r.Held, r.Asked)
		}
		kb := r.PerStream() / 1024
		times, goal, result := "n/a", "—", "—"
		if nginx != nil && nginx.PerStream() > 0 {
			times = fmt.Sprintf("%.2f×", r.PerStream()/nginx.PerStream())
		}
		if isRelay(r.Row) {
			bound := goalHeldKB
			if r.Row == "relay worker" {
				bound = goalHeldWorker
			}
			goal = fmt.Sprintf("≤ %.0f KB / stream", bound)
			result = verdict(kb, bound, "%.1f KB")
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %.1f | %s | %s | %s |\n", r.Row, held, mib(r.Idle), mib(r.Loaded),
			kb, times, goal, result)
	}
	return b.String()
}

// heldNotes are the failures worth a line under the held table.
func heldNotes(rows []HeldResult) []string {
	var out []string
	for _, r := range rows {
		if r.Skipped == "" && r.Failed > 0 {
			why := "closed while held"
			if r.FirstErr != "" {
				why = "first failure: " + r.FirstErr
			}
			out = append(out, fmt.Sprintf("%s: %d of %d held streams did not open or closed early (%s); "+
				"KB / stream is over the %d held", r.Row, r.Failed, r.Asked, why, r.Held))
		}
	}
	return out
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// Markdown renders every extra table that has figures, each under a heading that says how it
// was measured.
func (e Extras) Markdown(s Summary, load Load) string {
	var b strings.Builder
	b.WriteString("\n### Streaming: CPU per chunk\n\n")
	fmt.Fprintf(&b, "From the SSE rounds above (%d streams × %d rounds, %d events each): proxy CPU while "+
		"its streams ran ÷ data events delivered. relay worker is modelrelay-server plus modelrelay-worker.\n\n",
		load.Streams, load.Rounds, sseEvents)
	b.WriteString(s.ChunkCPUMarkdown())
	if e.Latency != nil {
		n := 0
		for _, r := range e.Latency {
			n = max(n, len(r.Samples)+r.Errors)
		}
		b.WriteString("\n### Added latency at concurrency 1\n\n")
		fmt.Fprintf(&b, "One client, one keep-alive connection per row, %d sequential non-streaming completions per row "+
			"after %d unmeasured, rows in turns of %d; added = row − direct at the same percentile.\n\n",
			n, latencyWarmup, latencyBatch)
		b.WriteString(LatencyMarkdown(e.Latency))
	}
	if e.Held != nil {
		b.WriteString("\n### Held idle streams: memory per stream\n\n")
		fmt.Fprintf(&b, "%d SSE streams open at once through each row, idle after the head and one event "+
			"(rows one at a time, each a fresh process with its own fake upstream, warmed first). "+
			"KB / stream = (peak RSS while held − RSS just before) ÷ streams held, RSS summed over the "+
			"row's processes; KB = 1,024 bytes.\n\n", e.Held[0].Asked)
		b.WriteString(HeldMarkdown(e.Held))
		notes := heldNotes(e.Held)
		if e.HeldNote != "" {
			notes = append([]string{e.HeldNote}, notes...)
		}
		for _, note := range notes {
			fmt.Fprintf(&b, "\nNote: %s", note)
		}
		if len(notes) > 0 {
			b.WriteString("\n")
		}
	}
	if pk := e.PortkeyMarkdown(s); pk != "" {
		b.WriteString("\n### The relay against Portkey's gateway\n\n")
		b.WriteString("Each relay row's lead over the Portkey row, figure by figure from the tables above: its " +
			"request rate over Portkey's, and Portkey's cost over its own (CPU, added latency, memory), so " +
			"above 1× is ahead.\n\n")
		b.WriteString(pk)
	}
	return b.String()
}

// lead is how far ahead of Portkey a relay row is on one figure: ours over theirs for a rate,
// theirs over ours for a cost, so above 1× is ahead either way.
func lead(ours, theirs float64, higherIsBetter bool) string {
	if ours <= 0 || theirs <= 0 {
		return "n/a"
	}
	x := theirs / ours
	if higherIsBetter {
		x = ours / theirs
	}
	if x >= 1 {
		return fmt.Sprintf("%.2f× ahead", x)
	}
	return fmt.Sprintf("%.2f× (behind)", x)
}

// PortkeyMarkdown is each relay row's lead over the Portkey row on every figure both have: the
// request rate, CPU per request and per streamed chunk, added latency at concurrency 1, peak
// RSS and memory per held stream. Empty when Portkey was not measured.
func (e Extras) PortkeyMarkdown(s Summary) string {
	pk := s.Row("Portkey")
	if pk == nil {
		return ""
	}
	latency := func(row string) *LatencyResult {
		var direct, found *LatencyResult
		for i := range e.Latency {
			switch e.Latency[i].Row {
			case "direct":
				direct = &e.Latency[i]
			case row:
				found = &e.Latency[i]
			}
		}
		if direct == nil || found == nil || len(found.Samples) == 0 {
			return nil
		}
		return &LatencyResult{P50: found.P50 - direct.P50, P99: found.P99 - direct.P99}
	}
	held := func(row string) float64 {
		for _, h := range e.Held {
			if h.Row == row && h.Skipped == "" {
				return h.PerStream()
			}
		}
		return 0
	}
	pkLat, pkHeld := latency("Portkey"), held("Portkey")
	var b strings.Builder
	b.WriteString("| row | req/s | CPU / request | CPU / chunk | added p50 | added p99 | peak RSS | KB / held stream |\n" +
		"|---|--:|--:|--:|--:|--:|--:|--:|\n")
	p50, p99, kb := "n/a", "n/a", "n/a"
	if pkLat != nil {
		p50, p99 = fmt.Sprintf("%.0f µs", us(pkLat.P50)), fmt.Sprintf("%.0f µs", us(pkLat.P99))
	}
	if pkHeld > 0 {
		kb = fmt.Sprintf("%.1f", pkHeld/1024)
	}
	fmt.Fprintf(&b, "| Portkey (its figures) | %.0f | %s / 1k | %.1f µs | %s | %s | %s | %s |\n", pk.Load.RPS(),
		ms(pk.CPUPer1k()), us(pk.CPUPerChunk()), p50, p99, mib(pk.RSS), kb)
	for _, r := range liveRows(s.Rows) {
		if !isRelay(r.Target.Row) {
			continue
		}
		p50, p99 := "n/a", "n/a"
		if lat := latency(r.Target.Row); lat != nil && pkLat != nil {
			p50, p99 = lead(float64(lat.P50), float64(pkLat.P50), false), lead(float64(lat.P99), float64(pkLat.P99), false)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Target.Row,
			lead(r.Load.RPS(), pk.Load.RPS(), true), lead(float64(r.CPUPer1k()), float64(pk.CPUPer1k()), false),
			lead(float64(r.CPUPerChunk()), float64(pk.CPUPerChunk()), false), p50, p99,
			lead(float64(r.RSS), float64(pk.RSS), false), lead(held(r.Target.Row), pkHeld, false))
	}
	return b.String()
}
