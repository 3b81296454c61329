package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// report prints the table, the targets and the machine, and writes the same to
// <tmp>/bench-results.md.
func report(stdout io.Writer, tmp string, rows []RowResult, notes []string, load Load, extras Extras) error {
	s := summarize(rows)
	var b strings.Builder
	fmt.Fprintf(&b, "## modelrelay vs nginx / HAProxy / Caddy / Portkey\n\n")
	fmt.Fprintf(&b, "Machine: %s\n\n", Machine())
	gen := "wrk -t2"
	if load.Wrk == "" {
		gen = "Go generator"
	}
	fmt.Fprintf(&b, "Non-streaming: %s, %d connections, %s per row in %d slices taken in turns across rows, "+
		"after %s warm-up, ~1 KB responses; p50/p99 are medians over the slices. "+
		"SSE: %d concurrent streams × %d rounds (rows in turns), %d events %s apart. "+
		"CPU = proxy utime+stime during the measured runs; RSS = VmHWM at the end (summed over processes).\n\n",
		gen, load.Conns, load.Duration, load.Passes, load.Warmup, load.Streams, load.Rounds, sseEvents, ssePacing)
	b.WriteString(s.Markdown())
	for _, r := range rows {
		if r.Skipped == "" && r.Target.Note != "" {
			notes = append(notes, r.Target.Note)
		}
		if r.Skipped == "" && r.Load.Errors > 0 {
			notes = append(notes, fmt.Sprintf("%s: %d non-streaming errors (not counted in req/s)", r.Target.Row, r.Load.Errors))
		}
	}
	for _, n := range notes {
		fmt.Fprintf(&b, "\nNote: %s", n)
	}
	if len(notes) > 0 {
		b.WriteString("\n")
	}
	b.WriteString(extras.Markdown(s, load))
	fmt.Fprintf(&b, "\n### Targets (ratios within this run)\n\n%s", s.TargetsMarkdown())
	out := b.String()
	fmt.Fprint(stdout, out)
	path := filepath.Join(tmp, "bench-results.md")
	if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	fmt.Fprintf(stdout, "\nResults written to %s\n", path)
	return nil
}
