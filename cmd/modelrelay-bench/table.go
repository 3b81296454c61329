package main

import (
	"fmt"
	"strings"
	"time"
)

// Summary holds the figures every ratio is taken against, all from the same run.
type Summary struct {
	Rows        []RowResult
	Direct      *RowResult
	BestPlain   *RowResult // the faster of nginx and HAProxy in requests/s
	directGap99 time.Duration
}

func summarize(rows []RowResult) Summary {
	s := Summary{Rows: rows}
	for i := range rows {
		r := &rows[i]
		if r.Skipped != "" {
			continue
		}
		switch r.Target.Row {
		case "direct":
			s.Direct = r
			s.directGap99 = percentile(r.SSE.Excess, 99)
		case "nginx", "HAProxy":
			if s.BestPlain == nil || r.Load.RPS() > s.BestPlain.Load.RPS() {
				s.BestPlain = r
			}
		}
	}
	return s
}

// Row finds a measured row by name, or nil.
func (s Summary) Row(name string) *RowResult {
	for i := range s.Rows {
		if s.Rows[i].Target.Row == name && s.Rows[i].Skipped == "" {
			return &s.Rows[i]
		}
	}
	return nil
}

// AddedGap99 is a row's p99 of (inter-event gap − pacing) minus the direct row's.
func (s Summary) AddedGap99(r *RowResult) time.Duration {
	return percentile(r.SSE.Excess, 99) - s.directGap99
}

const tableHeader = "| row | req/s | × direct | × best nginx/HAProxy | p50 | p99 | CPU ms / 1k req " +
	"| SSE TTFB p50 | SSE TTFB p99 | gap p99 − 20 ms | added gap p99 vs direct | failed streams | peak RSS |\n" +
	"|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n"

// Markdown renders the table, one line per row.
func (s Summary) Markdown() string {
	var b strings.Builder
	b.WriteString(tableHeader)
	for i := range s.Rows {
		r := &s.Rows[i]
		if r.Skipped != "" {
			fmt.Fprintf(&b, "| %s | skipped: %s |||||||||||||\n", r.Target.Row, r.Skipped)
			continue
		}
		fmt.Fprintf(&b, "| %s | %.0f | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d / %d | %s |\n",
			r.Target.Row, r.Load.RPS(),
			ratio(r.Load.RPS(), s.Direct), ratio(r.Load.RPS(), s.BestPlain),
			ms(r.Load.P50), ms(r.Load.P99), s.cpuCell(r),
			ms(percentile(r.SSE.TTFB, 50)), ms(percentile(r.SSE.TTFB, 99)),
			ms(percentile(r.SSE.Excess, 99)), s.addedCell(r),
			r.SSE.Failed, r.SSE.Streams, s.rssCell(r))
	}
	return b.String()
}

func (s Summary) cpuCell(r *RowResult) string {
	if len(r.Target.PIDs) == 0 {
		return "—"
	}
	return ms(r.CPUPer1k())
}

func (s Summary) addedCell(r *RowResult) string {
	if r.Target.Row == "direct" {
		return "(baseline)"
	}
	return ms(s.AddedGap99(r))
}

func (s Summary) rssCell(r *RowResult) string {
	if len(r.Target.PIDs) == 0 {
		return "—"
	}
	return mib(r.RSS)
}

func ratio(v float64, base *RowResult) string {
	if base == nil || base.Load.RPS() == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f×", v/base.Load.RPS())
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}

func mib(b int64) string {
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}
