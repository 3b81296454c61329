package main

import (
	"fmt"
	"strings"
)

// check is one line of the target list: the figure, the bound, and pass or miss.
type check struct {
	name   string
	ok     bool
	detail string // the figures and the margin
	info   bool   // a figure to read, with no bound: neither pass nor miss
}

// Targets evaluates the targets, all as ratios within this run. A target whose rows
// were not measured is reported as such, never as a pass.
func (s Summary) Targets() []check {
	static, circuit, worker := s.Row(relayStatic.row), s.Row("relay circuit"), s.Row("relay worker")
	// Every relay row, for the checks that hold each of them (the static row on the other server
	// among them).
	relays := []*RowResult{static, s.Row(relayStaticLean.row), circuit, worker}
	nginx, caddy := s.Row("nginx"), s.Row("Caddy")
	var out []check
	add := func(name string, need []*RowResult, eval func() check) {
		for _, r := range need {
			if r == nil {
				out = append(out, check{name: name, detail: "not measured in this run"})
				return
			}
		}
		c := eval()
		c.name = name
		out = append(out, c)
	}
	add("relay static ≥ 0.7× best of nginx/HAProxy req/s", []*RowResult{static, s.BestPlain}, func() check {
		return atLeast(static.Load.RPS()/s.BestPlain.Load.RPS(), 0.7, "×")
	})
	add("relay static ≥ 2× Caddy req/s", []*RowResult{static, caddy}, func() check {
		return atLeast(static.Load.RPS()/caddy.Load.RPS(), 2, "×")
	})
	add("relay static CPU per request ≤ 2× nginx", []*RowResult{static, nginx}, func() check {
		return atMost(float64(static.CPUPer1k())/float64(nginx.CPUPer1k()), 2, "×")
	})
	// Information, not a target: printed only when a relay static row ran with its floor row.
	if stages := s.ownStages(); stages != "" {
		out = append(out, check{info: true, detail: stages})
	}
	add("relay static added inter-chunk p99 ≤ nginx's", []*RowResult{static, nginx, s.Direct}, func() check {
		got, bound := s.AddedGap99(static), s.AddedGap99(nginx)
		return check{ok: got <= bound, detail: fmt.Sprintf("%s vs %s (margin %s)", ms(got), ms(bound), ms(bound-got))}
	})
	add("zero failed or truncated streams (relay rows)", []*RowResult{static}, func() check {
		var parts []string
		failed := 0
		for _, r := range relays {
			if r != nil {
				failed += r.SSE.Failed
				parts = append(parts, fmt.Sprintf("%s %d/%d", r.Target.Row, r.SSE.Failed, r.SSE.Streams))
			}
		}
		return check{ok: failed == 0, detail: strings.Join(parts, ", ")}
	})
	add("relay circuit within 10% of relay static req/s", []*RowResult{static, circuit}, func() check {
		return atLeast(circuit.Load.RPS()/static.Load.RPS(), 0.9, "×")
	})
	add("relay worker ≥ 0.6× relay static req/s", []*RowResult{static, worker}, func() check {
		return atLeast(worker.Load.RPS()/static.Load.RPS(), 0.6, "×")
	})
	add("relay worker CPU per request ≤ 3× nginx", []*RowResult{worker, nginx}, func() check {
		return atMost(float64(worker.CPUPer1k())/float64(nginx.CPUPer1k()), 3, "×")
	})
	portkey := s.Row("Portkey")
	add("every relay row ahead of Portkey on req/s, CPU per request and peak RSS", []*RowResult{portkey}, func() check {
		var behind []string
		for _, r := range relays {
			if r == nil {
				continue
			}
			if r.Load.RPS() <= portkey.Load.RPS() || r.CPUPer1k() >= portkey.CPUPer1k() || r.RSS >= portkey.RSS {
				behind = append(behind, r.Target.Row)
			}
		}
		if len(behind) > 0 {
			return check{detail: "behind on at least one: " + strings.Join(behind, ", ")}
		}
		return check{ok: true, detail: "see the lead table above"}
	})
	add("relay static peak RSS < 40 MiB at 200 streams", []*RowResult{static}, func() check {
		got := float64(static.RSS) / (1 << 20)
		return check{ok: got < 40, detail: fmt.Sprintf("%.1f MiB (margin %.1f MiB)", got, 40-got)}
	})
	return out
}

func atLeast(got, bound float64, unit string) check {
	return check{ok: got >= bound, detail: fmt.Sprintf("%.2f%s, need ≥ %.2f%s (margin %+.0f%%)", got, unit, bound, unit, (got/bound-1)*100)}
}

func atMost(got, bound float64, unit string) check {
	return check{ok: got <= bound, detail: fmt.Sprintf("%.2f%s, need ≤ %.2f%s (margin %+.0f%%)", got, unit, bound, unit, (1-got/bound)*100)}
}

// TargetsMarkdown renders the checklist.
func (s Summary) TargetsMarkdown() string {
	var b strings.Builder
	for _, c := range s.Targets() {
		if c.info {
			fmt.Fprintf(&b, "- [info] %s\n", c.detail)
			continue
		}
		mark := "MISS"
		switch {
		case c.detail == "not measured in this run":
			mark = "n/a"
		case c.ok:
			mark = "pass"
		}
		fmt.Fprintf(&b, "- [%s] %s: %s\n", mark, c.name, c.detail)
	}
	return b.String()
}
