package main

// `modelrelay-bench translation`: what translating large requests costs the relay in memory.
// Two bodies of 29 MB (the size, under the 32 MiB body limit), one user message of
// text blocks each: the 633,000 tiny blocks (more than a translation takes: refused
// with 413 before any work) and about 9,000 blocks of 3 KiB (the most a translation takes).
// Each is sent once, then six at once, in each direction (an Anthropic client to an
// OpenAI-only target, an OpenAI client to an Anthropic-only one) and untranslated, each row
// on a fresh relay so that its peak RSS (VmHWM) is its own. It prints the relay's RSS
// before, its peak, the growth per body byte, its RSS once answered, the answers, and the
// target's breaker afterwards. Not part of `make test`: about a minute.
//
//	modelrelay-bench translation [-size 29000000] [-at-once 1,6]

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"modelrelay/relay/translate/translatetest"
)

// translationRow is one way a large body goes through the relay.
type translationRow struct {
	name, path, model, target string
}

var translationRows = []translationRow{
	{"anthropic->openai", "/v1/messages", "to-openai", "openai-only"},
	{"openai->anthropic", "/v1/chat/completions", "to-anthropic", "anthropic-only"},
	{"untranslated", "/v1/chat/completions", "to-openai", "openai-only"},
}

// translationShapes are the two bodies each row sends: the (tiny blocks, far more
// than translation takes: refused with 413 before any work) and the most a translation
// takes (blocks of 3 KiB, just under the bound of 10,000 items).
var translationShapes = []struct {
	name    string
	textLen int
}{
	{"tiny blocks", 20},
	{"3 KiB blocks", 3 << 10},
}

func translationMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("modelrelay-bench translation", flag.ContinueOnError)
	fs.SetOutput(stderr)
	size := fs.Int("size", 29_000_000, "request body size in bytes (the relay's limit is 32 MiB)")
	atOnce := fs.String("at-once", "1,6", "comma list of how many bodies are sent at once, one row each")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var counts []int
	for _, f := range strings.Split(*atOnce, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fmt.Fprintln(stderr, "modelrelay-bench translation: -at-once wants positive counts, got", *atOnce)
			return 2
		}
		counts = append(counts, n)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := runTranslation(ctx, *size, counts, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "modelrelay-bench translation:", err)
		return 1
	}
	return 0
}

func runTranslation(ctx context.Context, size int, counts []int, stdout, stderr io.Writer) error {
	b, done, err := newToolBench(ctx, "translation", stderr)
	if err != nil {
		return err
	}
	defer done()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("fake target: %w", err)
	}
	fake := &http.Server{Handler: bothFamilies(), ReadHeaderTimeout: 10 * time.Second}
	go fake.Serve(ln)
	defer fake.Close()
	b.upstream = ln.Addr().String()

	fmt.Fprintf(stdout, "| direction | body | at once | RSS before | peak RSS | growth | growth / body | RSS after | answers | breaker after |\n")
	fmt.Fprintf(stdout, "|---|---|---|---|---|---|---|---|---|---|\n")
	for _, shape := range translationShapes {
		for _, row := range translationRows {
			body := translatetest.ManyBlocks(row.model, size, shape.textLen)
			for _, n := range counts {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				b.logf("%s, %s, %d at once, %d bytes each", row.name, shape.name, n, len(body))
				r, err := b.translationOne(row, body, n)
				if err != nil {
					return err
				}
				fmt.Fprintf(stdout, "| %s | %.1f MB, %s | %d | %d MiB | %d MiB | +%d MiB | %.1f× | %d MiB | %s | %s |\n", row.name,
					float64(len(body))/1e6, shape.name, n, r.before>>20, r.peak>>20, (r.peak-r.before)>>20,
					float64(r.peak-r.before)/float64(len(body)), r.after>>20, r.answers, r.breaker)
			}
		}
	}
	return nil
}

type translationResult struct {
	before, peak, after int64
	answers, breaker    string
}

// translationOne runs one row on a fresh relay: n copies of body at once.
func (b *Bench) translationOne(row translationRow, body []byte, n int) (translationResult, error) {
	dir := filepath.Join(b.tmp, "relay-translate")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return translationResult{}, err
	}
	listen, err := FreePort()
	if err != nil {
		return translationResult{}, err
	}
	config, err := renderTemplate(b.repoRoot, dir, "relay-translate.yaml", templateData{Dir: dir, Listen: listen, Upstream: b.upstream})
	if err != nil {
		return translationResult{}, err
	}
	cmd, err := b.children.Start("relay-translate", relayEnv(""), b.bins.server, "--config", config)
	if err != nil {
		return translationResult{}, err
	}
	defer b.children.Stop(cmd)
	small := translatetest.ManyBlocks(row.model, 1000, 20)
	warm := func() error { _, err := postBody(b.ctx, listen, row.path, small, 10*time.Second); return err }
	deadline := time.Now().Add(20 * time.Second)
	for err := warm(); err != nil; err = warm() {
		if time.Now().After(deadline) || b.ctx.Err() != nil {
			return translationResult{}, fmt.Errorf("relay not serving (see relay-translate.log in %s): %w", b.tmp, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for range 20 {
		warm()
	}
	pid := cmd.Process.Pid
	res := translationResult{before: currentRSS(pid)}
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			statuses[i], _ = postBody(b.ctx, listen, row.path, body, 2*time.Minute)
		})
	}
	wg.Wait()
	res.peak, res.after = vmHWM(pid), currentRSS(pid)
	slices.Sort(statuses)
	var parts []string
	for i := 0; i < len(statuses); {
		j := i
		for j < len(statuses) && statuses[j] == statuses[i] {
			j++
		}
		label := strconv.Itoa(statuses[i])
		if statuses[i] == 0 {
			label = "no answer"
		}
		parts = append(parts, fmt.Sprintf("%d× %s", j-i, label))
		i = j
	}
	res.answers = strings.Join(parts, ", ")
	res.breaker = breakerOf(b.ctx, listen, row.target)
	return res, nil
}

// postBody sends body and returns the answer's status once the whole answer is read.
func postBody(ctx context.Context, addr, path string, body []byte, timeout time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+path, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, fmt.Errorf("status %d", resp.StatusCode)
	}
	return resp.StatusCode, nil
}

// breakerOf reads target's breaker state from the relay's metrics.
func breakerOf(ctx context.Context, addr, target string) string {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "unknown"
	}
	defer resp.Body.Close()
	text, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`modelrelay_target_breaker_state\{[^}]*target="` + regexp.QuoteMeta(target) + `"[^}]*\} (\S+)`).FindSubmatch(text)
	if m == nil {
		return "unknown"
	}
	switch string(m[1]) {
	case "0":
		return "closed"
	case "1":
		return "open"
	case "2":
		return "half-open"
	}
	return string(m[1])
}

// bothFamilies is a fake model server that speaks both API families and reads every body
// whole before it answers a short fixed answer in the path's family.
func bothFamilies() http.Handler {
	const message = `{"id":"msg_bench","type":"message","role":"assistant","model":"bench",` +
		`"content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","stop_sequence":null,` +
		`"usage":{"input_tokens":8,"output_tokens":1}}`
	drain := func(w http.ResponseWriter, r *http.Request) bool {
		if _, err := io.Copy(io.Discard, r.Body); err != nil && !errors.Is(err, io.EOF) {
			http.Error(w, "read body", http.StatusBadRequest)
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		return true
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		if drain(w, r) {
			w.Write(completionBody)
		}
	})
	mux.HandleFunc("POST /v1/messages", func(w http.ResponseWriter, r *http.Request) {
		if drain(w, r) {
			io.WriteString(w, message)
		}
	})
	return mux
}
