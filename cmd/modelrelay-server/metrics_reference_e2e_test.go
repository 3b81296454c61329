package main

// Issue 17: the metrics reference and the Grafana dashboard, both checked against what the real
// server exports. One AppProxy-mode server (every family the process registers: the relay's,
// the GenAI ones, the coordinator conversation's, ingress's, Go's and the process's) serves
// enough traffic that every family has a series; its /metrics is then
//
//   - rendered as the Markdown table of testdata/metrics-reference.md (the README's "Metrics
//     reference"; go test -run MetricsReference -update-metrics-reference rewrites it), and
//   - the dictionary every PromQL query of deploy/grafana-dashboard.json must take its metric
//     names from.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
)

var updateMetricsReference = flag.Bool("update-metrics-reference", false,
	"rewrite testdata/metrics-reference.md from the server's /metrics")

const (
	metricsReferenceFile = "testdata/metrics-reference.md"
	dashboardFile        = "../../deploy/grafana-dashboard.json"
)

func TestE2EMetricsReferenceAndDashboard(t *testing.T) {
	t.Parallel()
	config := writeConfig(t, "fallbacks:\n  ghost: [demo]\n")
	e := startE2E(t, e2eOptions{env: map[string]string{"MODELRELAY_DEMO": "true", "MODELRELAY_CONFIG": config}})
	rep := newReplica(t, "metrics", "circ-model")
	c := newCircuit("metrics", route{port: rep.port()})
	e.createAndAck(c) // an event, and its ack
	e.waitServing(circuitHost("metrics"), bearer(tokenFor(t, c.id)))

	// A streamed answer that reports usage (the GenAI histograms), a model that falls back,
	// and a refusal at ingress.
	stream := []byte(`{"model":"demo","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hello"}]}`)
	if st, _, body := e.do("POST", "", "/v1/chat/completions", withJSON(nil), stream); st != 200 || !bytes.Contains(body, []byte(`"usage"`)) {
		t.Fatalf("demo stream: %d %s", st, body)
	}
	if st, _, body := e.chat("", "ghost", nil); st != 200 {
		t.Fatalf("ghost -> demo: %d %s", st, body)
	}
	if st, _, body := e.chat(circuitHost("nobody"), "m", nil); st != 400 {
		t.Fatalf("unknown subdomain: %d %s", st, body)
	}
	st, text := getFrom(t, e.addr, "/metrics")
	if st != 200 {
		t.Fatalf("/metrics: %d", st)
	}
	families := parseExposition(t, text)
	if n := metricSample(families, "modelrelay_ingress_rejections_total", `reason="unknown_subdomain"`); n != 1 {
		t.Errorf("ingress rejections for the unknown subdomain: %v, want 1", n)
	}

	t.Run("reference", func(t *testing.T) { checkMetricsReference(t, families) })
	t.Run("dashboard", func(t *testing.T) { checkDashboard(t, families) })
}

// family is one metric family as /metrics exposes it.
type family struct {
	name, kind, help string
	labels           []string          // sorted; without a histogram's le or a summary's quantile
	samples          map[string]string // "suffix{labels}" -> value, for the few checks on values
}

// parseExposition reads the Prometheus text format: HELP and TYPE lines, then samples.
func parseExposition(t *testing.T, text []byte) map[string]*family {
	t.Helper()
	families := map[string]*family{}
	get := func(name string) *family {
		f := families[name]
		if f == nil {
			f = &family{name: name, samples: map[string]string{}}
			families[name] = f
		}
		return f
	}
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
		case strings.HasPrefix(line, "# HELP "):
			name, help, _ := strings.Cut(strings.TrimPrefix(line, "# HELP "), " ")
			get(name).help = strings.NewReplacer(`\\`, `\`, `\n`, "\n").Replace(help)
		case strings.HasPrefix(line, "# TYPE "):
			name, kind, _ := strings.Cut(strings.TrimPrefix(line, "# TYPE "), " ")
			get(name).kind = kind
		case line[0] == '#':
		default:
			name, labels, value := splitSample(t, line)
			f := families[name]
			suffix := ""
			if f == nil {
				for _, s := range []string{"_bucket", "_sum", "_count"} {
					if base, ok := strings.CutSuffix(name, s); ok && families[base] != nil {
						f, suffix = families[base], s
						break
					}
				}
			}
			if f == nil {
				t.Fatalf("/metrics: sample %q before its family's TYPE line", line)
			}
			for _, l := range labels {
				if !(l == "le" && f.kind == "histogram" || l == "quantile" && f.kind == "summary") && !slices.Contains(f.labels, l) {
					f.labels = append(f.labels, l)
				}
			}
			f.samples[suffix+line[len(name):strings.LastIndexByte(line, ' ')]] = value
		}
	}
	for _, f := range families {
		sort.Strings(f.labels)
	}
	return families
}

// splitSample cuts `name{a="x",b="y"} value` into its name, label names and value.
func splitSample(t *testing.T, line string) (name string, labels []string, value string) {
	t.Helper()
	end := strings.IndexAny(line, "{ ")
	if end < 0 {
		t.Fatalf("/metrics: malformed sample %q", line)
	}
	name, rest := line[:end], line[end:]
	if rest[0] == '{' {
		i := 1
		for i < len(rest) && rest[i] != '}' {
			eq := strings.IndexByte(rest[i:], '=')
			if eq < 0 || i+eq+1 >= len(rest) || rest[i+eq+1] != '"' {
				t.Fatalf("/metrics: malformed labels in %q", line)
			}
			labels = append(labels, rest[i:i+eq])
			j := i + eq + 2
			for j < len(rest) && rest[j] != '"' {
				if rest[j] == '\\' {
					j++
				}
				j++
			}
			i = j + 1
			if i < len(rest) && rest[i] == ',' {
				i++
			}
		}
		rest = rest[min(i+1, len(rest)):]
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		t.Fatalf("/metrics: no value in %q", line)
	}
	return name, labels, fields[0]
}

// metricSample is the value of the family's sample whose labels contain match (-1: none).
func metricSample(families map[string]*family, name, match string) float64 {
	f := families[name]
	if f == nil {
		return -1
	}
	for key, v := range f.samples {
		if strings.Contains(key, match) {
			var n float64
			fmt.Sscan(v, &n)
			return n
		}
	}
	return -1
}

// ownMetric says whether a family is the relay's own (documented one by one); the Go and
// process collectors' families are documented as two groups, their set depending on the Go
// version and the platform.
func ownMetric(name string) bool {
	return strings.HasPrefix(name, "modelrelay_") || strings.HasPrefix(name, "gen_ai_")
}

// referenceTable renders the families as the README's Markdown table: the relay's own, in name
// order (modelrelay_ first, then the GenAI conventions'), then the Go runtime and the process.
func referenceTable(families map[string]*family) string {
	var names []string
	for name := range families {
		if ownMetric(name) {
			names = append(names, name)
		}
	}
	sort.Slice(names, func(i, j int) bool {
		gi, gj := strings.HasPrefix(names[i], "gen_ai_"), strings.HasPrefix(names[j], "gen_ai_")
		if gi != gj {
			return gj
		}
		return names[i] < names[j]
	})
	cell := strings.NewReplacer("|", `\|`, "\n", " ")
	var b strings.Builder
	b.WriteString("| Metric | Type | Labels | Help |\n|---|---|---|---|\n")
	for _, name := range names {
		f := families[name]
		labels := "—"
		if len(f.labels) > 0 {
			labels = "`" + strings.Join(f.labels, "`, `") + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", name, f.kind, labels, cell.Replace(f.help))
	}
	b.WriteString("| `go_*` | gauge, counter, summary | — | The Go runtime, from client_golang's Go collector: `go_goroutines`, `go_threads`, `go_gc_duration_seconds`, `go_memstats_*`, `go_info`, … |\n")
	b.WriteString("| `process_*` | gauge, counter | — | The process, from client_golang's process collector (Linux): `process_cpu_seconds_total`, `process_resident_memory_bytes`, `process_open_fds`, `process_start_time_seconds`, … |\n")
	return b.String()
}

func checkMetricsReference(t *testing.T, families map[string]*family) {
	for name, f := range families {
		if f.kind == "" || f.help == "" {
			t.Errorf("%s: type %q, help %q: every family needs both", name, f.kind, f.help)
		}
		if ownMetric(name) && f.kind == "counter" && !strings.HasSuffix(name, "_total") {
			t.Errorf("%s: a counter's name ends in _total", name)
		}
	}
	need := []string{"go_goroutines", "go_gc_duration_seconds"}
	if runtime.GOOS == "linux" {
		need = append(need, "process_cpu_seconds_total", "process_resident_memory_bytes")
	}
	for _, name := range need {
		if families[name] == nil {
			t.Errorf("/metrics has no %s (the reference says it does)", name)
		}
	}
	table := referenceTable(families)
	if *updateMetricsReference {
		if err := os.WriteFile(metricsReferenceFile, []byte(table), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(metricsReferenceFile)
	if err != nil {
		t.Fatalf("%v (create it with -update-metrics-reference)", err)
	}
	if string(want) != table {
		t.Errorf("%s is not what /metrics exports; if the change is meant, rerun with -update-metrics-reference "+
			"and copy the table to the README's metrics reference.\n%s", metricsReferenceFile, lineDiff(string(want), table))
	}
}

// lineDiff lists the lines only one of the two texts has.
func lineDiff(want, got string) string {
	var b strings.Builder
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	for _, l := range wl {
		if !slices.Contains(gl, l) {
			b.WriteString("- " + l + "\n")
		}
	}
	for _, l := range gl {
		if !slices.Contains(wl, l) {
			b.WriteString("+ " + l + "\n")
		}
	}
	return b.String()
}

// The families a useful dashboard of the relay must graph (issue 17's list).
var dashboardMustGraph = []string{
	"modelrelay_requests_total", "modelrelay_request_duration_seconds", "modelrelay_time_to_first_byte_seconds",
	"gen_ai_server_time_to_first_token_seconds", "gen_ai_client_token_usage", "modelrelay_queue_depth",
	"modelrelay_queue_wait_seconds", "modelrelay_target_healthy", "modelrelay_target_breaker_state",
	"modelrelay_target_in_flight", "modelrelay_workers_connected", "modelrelay_ingress_rejections_total",
}

func checkDashboard(t *testing.T, families map[string]*family) {
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Inputs []struct {
			Name     string `json:"name"`
			PluginID string `json:"pluginId"`
		} `json:"__inputs"`
		Panels     []map[string]any `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if len(dash.Inputs) != 1 || dash.Inputs[0].Name != "DS_PROMETHEUS" || dash.Inputs[0].PluginID != "prometheus" {
		t.Errorf("__inputs: %+v, want the one Prometheus datasource input DS_PROMETHEUS", dash.Inputs)
	}
	var queries []string // "where: query"
	for _, p := range dash.Panels {
		title, _ := p["title"].(string)
		if p["type"] == "row" {
			continue
		}
		if ds, _ := p["datasource"].(map[string]any); ds["uid"] != "${DS_PROMETHEUS}" {
			t.Errorf("panel %q: datasource %v, want uid ${DS_PROMETHEUS}", title, p["datasource"])
		}
		targets, _ := p["targets"].([]any)
		if len(targets) == 0 {
			t.Errorf("panel %q has no query", title)
		}
		for _, tg := range targets {
			expr, _ := tg.(map[string]any)["expr"].(string)
			queries = append(queries, "panel "+title+": "+expr)
		}
	}
	for _, v := range dash.Templating.List {
		q := v.Query
		if m, ok := q.(map[string]any); ok {
			q = m["query"]
		}
		s, _ := q.(string)
		queries = append(queries, "variable "+v.Name+": "+s)
	}
	graphed := map[string]bool{}
	for _, q := range queries {
		where, expr, _ := strings.Cut(q, ": ")
		names := promQLMetrics(expr)
		if len(names) == 0 {
			t.Errorf("%s: no relay metric in %q", where, expr)
		}
		for _, name := range names {
			f := exportedFamily(families, name)
			if f == "" {
				t.Errorf("%s: %s is not a metric the server exports (%q)", where, name, expr)
				continue
			}
			graphed[f] = true
		}
	}
	for _, name := range dashboardMustGraph {
		if !graphed[name] {
			t.Errorf("the dashboard graphs nothing of %s", name)
		}
	}
}

// exportedFamily maps a name a query uses to the family that exports it: itself, or a
// histogram's or summary's _bucket, _sum or _count series. "" = none.
func exportedFamily(families map[string]*family, name string) string {
	if families[name] != nil {
		return name
	}
	for _, s := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, s)
		if f := families[base]; ok && f != nil && (f.kind == "histogram" || f.kind == "summary" && s != "_bucket") {
			return base
		}
	}
	return ""
}

var (
	promString    = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)
	promMatchers  = regexp.MustCompile(`\{[^}]*\}`)
	promGrouping  = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promLabelVals = regexp.MustCompile(`\blabel_values\s*\(([^,()]*)(?:,[^()]*)?\)`)
	promIdent     = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
)

// promQLMetrics finds the metric names a PromQL query (or a Grafana label_values query) uses,
// among the names the relay's families could have: label names inside selectors and grouping
// clauses (gen_ai_request_model, say) are not metric names.
func promQLMetrics(expr string) []string {
	expr = promLabelVals.ReplaceAllString(expr, "$1") // label_values(metric, label): the label is no metric
	expr = promString.ReplaceAllString(expr, `""`)
	expr = promMatchers.ReplaceAllString(expr, "")
	expr = promGrouping.ReplaceAllString(expr, "")
	var names []string
	for _, id := range promIdent.FindAllString(expr, -1) {
		for _, prefix := range []string{"modelrelay_", "gen_ai_", "go_", "process_"} {
			if strings.HasPrefix(id, prefix) && !slices.Contains(names, id) {
				names = append(names, id)
			}
		}
	}
	return names
}

func TestPromQLMetrics(t *testing.T) {
	cases := []struct {
		expr string
		want []string
	}{
		{`sum by (gen_ai_request_model, gen_ai_token_type) (rate(gen_ai_client_token_usage_sum{instance=~"$instance"}[$__rate_interval]))`,
			[]string{"gen_ai_client_token_usage_sum"}},
		{`histogram_quantile(0.99, sum by (le, pool) (rate(modelrelay_queue_wait_seconds_bucket{pool=~"$pool"}[5m])))`,
			[]string{"modelrelay_queue_wait_seconds_bucket"}},
		{`sum(rate(modelrelay_requests_total{status=~"5.."}[1m])) / on (instance) group_left (gen_ai_x) sum(rate(modelrelay_requests_total[1m]))`,
			[]string{"modelrelay_requests_total"}},
		{`label_values(modelrelay_queue_depth{instance=~"$instance"}, pool)`, []string{"modelrelay_queue_depth"}},
		{`label_values(gen_ai_client_token_usage_count, gen_ai_request_model)`, []string{"gen_ai_client_token_usage_count"}},
		{`count(modelrelay_target_healthy == 0) or vector(0)`, []string{"modelrelay_target_healthy"}},
		{`process_resident_memory_bytes + go_goroutines{job="modelrelay_x"}`, []string{"process_resident_memory_bytes", "go_goroutines"}},
		{`up{job="relay"}`, nil},
	}
	for _, tc := range cases {
		if got := promQLMetrics(tc.expr); !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %q, want %q", tc.expr, got, tc.want)
		}
	}
	families := map[string]*family{"h": {kind: "histogram"}, "s": {kind: "summary"}, "c_total": {kind: "counter"}}
	for name, want := range map[string]string{"h_bucket": "h", "h_count": "h", "s_sum": "s", "s_bucket": "", "c_total": "c_total", "c_total_count": "", "h": "h", "x": ""} {
		if got := exportedFamily(families, name); got != want {
			t.Errorf("exportedFamily(%s) = %q, want %q", name, got, want)
		}
	}
}
