package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// wrkScript makes wrk POST the completion request instead of its default GET.
const wrkScript = `wrk.method = "POST"
wrk.body = '` + completionRequest + `'
wrk.headers["Content-Type"] = "application/json"
`

// runWrk drives addr with wrk (two threads, conns connections) for d and parses its summary.
func runWrk(ctx context.Context, wrk, tmp string, t Target, conns int, d time.Duration) (LoadResult, error) {
	script := filepath.Join(tmp, "post.lua")
	if err := os.WriteFile(script, []byte(wrkScript), 0o644); err != nil {
		return LoadResult{}, fmt.Errorf("write wrk script: %w", err)
	}
	secs := max(1, int(d.Round(time.Second)/time.Second))
	args := []string{"-t2", fmt.Sprintf("-c%d", conns), fmt.Sprintf("-d%ds", secs), "--latency",
		"--timeout", "10s", "-s", script}
	if t.Host != "" {
		args = append(args, "-H", "Host: "+t.Host)
	}
	for name, values := range t.Header {
		for _, v := range values {
			args = append(args, "-H", name+": "+v)
		}
	}
	args = append(args, "http://"+t.Addr+completionPath)
	// wrk stops itself after d; the context bound is a safety net for a hung wrk.
	ctx, cancel := context.WithTimeout(ctx, d+30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, wrk, args...).CombinedOutput()
	if err != nil {
		return LoadResult{}, fmt.Errorf("wrk: %w: %s", err, out)
	}
	return parseWrk(string(out))
}

var (
	wrkTotal   = regexp.MustCompile(`(\d+) requests in ([\d.]+)(us|ms|s|m)`)
	wrkPercent = regexp.MustCompile(`(?m)^\s+(50|99)(?:\.000)?%\s+([\d.]+)(us|ms|s|m)\s*$`)
	wrkNon2xx  = regexp.MustCompile(`Non-2xx or 3xx responses: (\d+)`)
	wrkSocket  = regexp.MustCompile(`Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)`)
)

// parseWrk reads the summary wrk prints with --latency.
func parseWrk(out string) (LoadResult, error) {
	res := LoadResult{Tool: "wrk"}
	m := wrkTotal.FindStringSubmatch(out)
	if m == nil {
		return res, fmt.Errorf("wrk output has no request total:\n%s", out)
	}
	total, _ := strconv.ParseInt(m[1], 10, 64)
	res.Elapsed = wrkDuration(m[2], m[3])
	for _, p := range wrkPercent.FindAllStringSubmatch(out, -1) {
		switch p[1] {
		case "50":
			res.P50 = wrkDuration(p[2], p[3])
		case "99":
			res.P99 = wrkDuration(p[2], p[3])
		}
	}
	if m := wrkNon2xx.FindStringSubmatch(out); m != nil {
		res.Errors, _ = strconv.ParseInt(m[1], 10, 64)
	}
	if m := wrkSocket.FindStringSubmatch(out); m != nil {
		for _, s := range m[1:] {
			n, _ := strconv.ParseInt(s, 10, 64)
			res.Errors += n
		}
	}
	// wrk counts non-2xx answers among its requests; the table's rate counts only good ones.
	res.Requests = max(0, total-res.Errors)
	return res, nil
}

func wrkDuration(value, unit string) time.Duration {
	v, _ := strconv.ParseFloat(value, 64)
	scale := map[string]float64{"us": 1e3, "ms": 1e6, "s": 1e9, "m": 60e9}[strings.ToLower(unit)]
	return time.Duration(math.Round(v * scale))
}
