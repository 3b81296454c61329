package main

// Helpers of the client API key tests (keys_e2e_test.go): the real binary on a private
// PostgreSQL, the admin API of keys, the usage a fake model server reported, and what the
// relay recorded of it.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os/exec"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// keyRelay is the real server binary, its address and everything it logged.
type keyRelay struct {
	t      testing.TB
	addr   string
	logs   *lockedBuffer
	cmd    *exec.Cmd
	exited chan error
}

// startKeyRelay runs the binary on a YAML config with the e2e base environment (debug logs,
// the admin token), env on top, and command-line args; it returns once the server listens.
func startKeyRelay(t testing.TB, config string, env map[string]string, args ...string) *keyRelay {
	t.Helper()
	bin := serverBinary(t)
	logs := &lockedBuffer{}
	extra := map[string]string{"MODELRELAY_CONFIG": writeConfig(t, config)}
	for k, v := range env {
		extra[k] = v
	}
	addr, cmd, exited := launchBinary(t, logs, func(addr string) (*exec.Cmd, chan error) {
		return runBinary(t, bin, &e2eEnv{t: t}, addr, extra, logs, args...)
	})
	return &keyRelay{t: t, addr: addr, logs: logs, cmd: cmd, exited: exited}
}

// sigterm sends SIGTERM and waits (at most 30 s) for a clean exit.
func (r *keyRelay) sigterm() {
	r.t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		r.t.Fatal(err)
	}
	select {
	case err := <-r.exited:
		if err != nil {
			r.t.Fatalf("the server exited with %v after SIGTERM\n%s", err, r.logs.tail(4000))
		}
	case <-time.After(30 * time.Second):
		r.t.Fatalf("the server did not exit within 30 s of SIGTERM\n%s", r.logs.tail(4000))
	}
}

// send posts body to path with header.
func (r *keyRelay) send(path string, header http.Header, body string) relayAnswer {
	return sendTo(r.addr, "", path, header, body)
}

// openai is an OpenAI chat completion for model with key (sent as Authorization: Bearer).
func (r *keyRelay) openai(secret, model string, extra ...string) relayAnswer {
	return r.send("/v1/chat/completions", keyHeader(secret, "bearer"), chatJSON(model, extra...))
}

// anthropic is an Anthropic message for model with key (sent as x-api-key, as Anthropic
// clients do).
func (r *keyRelay) anthropic(secret, model string, extra ...string) relayAnswer {
	return r.send("/v1/messages", keyHeader(secret, "x-api-key"), anthropicJSON(model, extra...))
}

// keyHeader carries secret as how says: "bearer" (Authorization) or "x-api-key". An Anthropic
// version goes along, as Anthropic clients send it ("" secret: no key at all).
func keyHeader(secret, how string) http.Header {
	h := http.Header{"Anthropic-Version": {"2023-06-01"}}
	switch {
	case secret == "":
	case how == "x-api-key":
		h.Set("X-Api-Key", secret)
	default:
		h.Set("Authorization", "Bearer "+secret)
	}
	return h
}

// anthropicJSON is an Anthropic messages body for model; extra are more top-level members.
func anthropicJSON(model string, extra ...string) string {
	members := append([]string{fmt.Sprintf(`"model":%q`, model), `"max_tokens":64`,
		`"messages":[{"role":"user","content":"hi there"}]`}, extra...)
	return "{" + strings.Join(members, ",") + "}"
}

// adminCall sends an admin request with token ("" = no Authorization) and returns the answer.
func adminCall(t testing.TB, addr, method, path, token, body string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://"+addr+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := fbClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// createdKey is what POST /admin/keys answered.
type createdKey struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Prefix string `json:"prefix"`
	Secret string `json:"secret"`
}

// createKey creates a key on the relay at addr (body: the POST /admin/keys object) and fails
// the test unless it answers 201 with an id and a secret.
func createKey(t testing.TB, addr, body string) createdKey {
	t.Helper()
	st, b := adminCall(t, addr, "POST", "/admin/keys", e2eAdmin, body)
	var k createdKey
	if st != http.StatusCreated || json.Unmarshal(b, &k) != nil || k.ID == "" || k.Secret == "" {
		t.Fatalf("POST /admin/keys %s: %d %s", body, st, b)
	}
	return k
}

// listKeys is GET /admin/keys: the keys by id.
func listKeys(t testing.TB, addr string) map[string]map[string]any {
	t.Helper()
	st, b := adminCall(t, addr, "GET", "/admin/keys", e2eAdmin, "")
	var doc struct {
		Keys []map[string]any `json:"keys"`
	}
	if st != 200 || json.Unmarshal(b, &doc) != nil || doc.Keys == nil {
		t.Fatalf("GET /admin/keys: %d %s", st, b)
	}
	out := map[string]map[string]any{}
	for _, k := range doc.Keys {
		out[fmt.Sprint(k["id"])] = k
	}
	return out
}

// usageRow is one row of a key's usage.
type usageRow struct {
	Day          string `json:"day"`
	Model        string `json:"model"`
	Requests     int64  `json:"requests"`
	InputTokens  int64  `json:"input_tokens"`
	OutputTokens int64  `json:"output_tokens"`
}

// keyUsage is GET /admin/keys/{id}/usage; ok is false (with the answer in why) unless it
// answered 200 with the key's id.
func keyUsage(t testing.TB, addr, id string) (rows []usageRow, ok bool, why string) {
	t.Helper()
	st, b := adminCall(t, addr, "GET", "/admin/keys/"+id+"/usage", e2eAdmin, "")
	var doc struct {
		KeyID *string    `json:"key_id"`
		Usage []usageRow `json:"usage"`
	}
	if st != 200 || json.Unmarshal(b, &doc) != nil || doc.KeyID == nil || *doc.KeyID != id || doc.Usage == nil {
		return nil, false, fmt.Sprintf("%d %s", st, b)
	}
	return doc.Usage, true, string(b)
}

// mustKeyUsage is keyUsage failing the test on a bad answer.
func mustKeyUsage(t testing.TB, addr, id string) []usageRow {
	t.Helper()
	rows, ok, why := keyUsage(t, addr, id)
	if !ok {
		t.Fatalf("GET /admin/keys/%s/usage: %s", id, why)
	}
	return rows
}

// pgConnect opens a connection to url for the test.
func pgConnect(t testing.TB, url string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect to %s: %v", url, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// dbUsage reads a key's rows of modelrelay_key_usage straight from the database.
func dbUsage(t testing.TB, url, id string) []usageRow {
	t.Helper()
	conn := pgConnect(t, url)
	rows, err := conn.Query(context.Background(), `SELECT to_char(day, 'YYYY-MM-DD'), model, requests, input_tokens, output_tokens
		FROM modelrelay_key_usage WHERE key_id = $1 ORDER BY day, model`, id)
	if err != nil {
		t.Fatalf("read modelrelay_key_usage: %v", err)
	}
	var out []usageRow
	for rows.Next() {
		var u usageRow
		if err := rows.Scan(&u.Day, &u.Model, &u.Requests, &u.InputTokens, &u.OutputTokens); err != nil {
			t.Fatal(err)
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// tally is what some requests used of one model, as the model server reported it.
type tally struct {
	requests, input, output int64
}

func (a tally) plus(b tally) tally {
	return tally{a.requests + b.requests, a.input + b.input, a.output + b.output}
}

// reported reads the usage a fake model server wrote in its answer: the usage member of a JSON
// answer; in an OpenAI stream its usage chunk; in an Anthropic stream message_start's input
// and message_delta's (cumulative) output. ok is false when the answer reported none.
func reported(c fakeCall) (u tally, ok bool) {
	u.requests = 1
	ans := bytes.TrimSpace(c.Answer)
	read := func(m map[string]any) {
		num := func(k string) (int64, bool) {
			f, isNum := m[k].(float64)
			return int64(f), isNum
		}
		if n, isNum := num("prompt_tokens"); isNum {
			u.input, ok = n, true
		}
		if n, isNum := num("completion_tokens"); isNum {
			u.output, ok = n, true
		}
		if n, isNum := num("input_tokens"); isNum {
			u.input, ok = n, true
		}
		if n, isNum := num("output_tokens"); isNum {
			u.output, ok = n, true
		}
	}
	if bytes.HasPrefix(ans, []byte("{")) {
		var doc map[string]any
		if json.Unmarshal(ans, &doc) == nil {
			if m, isMap := doc["usage"].(map[string]any); isMap {
				read(m)
			}
		}
		return u, ok
	}
	sc := bufio.NewScanner(bytes.NewReader(ans))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		data, isData := strings.CutPrefix(sc.Text(), "data: ")
		if !isData || data == "[DONE]" {
			continue
		}
		var ev map[string]any
		if json.Unmarshal([]byte(data), &ev) != nil {
			continue
		}
		if m, isMap := ev["usage"].(map[string]any); isMap {
			read(m)
		}
		if msg, isMap := ev["message"].(map[string]any); isMap && ev["type"] == "message_start" {
			if m, isMap := msg["usage"].(map[string]any); isMap {
				read(m)
			}
		}
	}
	return u, ok
}

// lastReport is the usage the fake's one new call since before reported (fails the test unless
// exactly one call arrived and it reported usage).
func lastReport(t testing.TB, label string, f *fakeModel, before int) tally {
	t.Helper()
	calls := f.calls()
	if len(calls) != before+1 {
		t.Fatalf("%s: the fake model server got %d calls, want 1", label, len(calls)-before)
	}
	u, ok := reported(calls[before])
	if !ok {
		t.Fatalf("%s: the fake model server reported no usage in %.600s", label, calls[before].Answer)
	}
	return u
}

// checkUsage compares a key's usage rows with want (model -> totals), all on the UTC day of the
// test (or the day before, for a test that crosses midnight).
func checkUsage(t testing.TB, label string, rows []usageRow, want map[string]tally) {
	t.Helper()
	if why := usageDiff(rows, want); why != "" {
		t.Errorf("%s: %s", label, why)
	}
}

// usageDiff says how rows differ from want ("" = they match).
func usageDiff(rows []usageRow, want map[string]tally) string {
	today := time.Now().UTC()
	days := []string{today.Format(time.DateOnly), today.Add(-time.Hour).Format(time.DateOnly)}
	got := map[string]tally{}
	for _, r := range rows {
		if !slices.Contains(days, r.Day) {
			return fmt.Sprintf("row of day %q, want %v: %+v", r.Day, days, rows)
		}
		got[r.Model] = got[r.Model].plus(tally{r.Requests, r.InputTokens, r.OutputTokens})
	}
	if !reflect.DeepEqual(got, want) {
		return fmt.Sprintf("usage %+v, want %+v (rows %+v)", got, want, rows)
	}
	return ""
}

// metricSum adds up the samples of a metric family's series (name exactly, then '{' or ' ')
// whose labels contain every one of labels (`name="value"`). -1: no such series.
func metricSum(t testing.TB, addr, name string, labels ...string) float64 {
	t.Helper()
	_, b := getFrom(t, addr, "/metrics")
	sum, found := 0.0, false
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		match := true
		for _, l := range labels {
			match = match && strings.Contains(rest, l)
		}
		if !match {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err == nil {
			sum, found = sum+v, true
		}
	}
	if !found {
		return -1
	}
	return sum
}

// randomSecret is a secret shaped like a relay key ("mr_live_" and 32 alphanumerics) that no
// relay made.
func randomSecret(t testing.TB) string {
	t.Helper()
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	var b strings.Builder
	b.WriteString("mr_live_")
	for range 32 {
		n, err := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		if err != nil {
			t.Fatal(err)
		}
		b.WriteByte(alphabet[n.Int64()])
	}
	return b.String()
}

var secretShape = regexp.MustCompile(`^mr_live_[A-Za-z0-9]{32}$`)

// jsonEqual reports whether two JSON texts hold the same value (member order aside).
func jsonEqual(a []byte, b string) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal([]byte(b), &y) == nil && reflect.DeepEqual(x, y)
}

// errorOf decodes an error answer of either dialect: the top-level type (Anthropic "error",
// OpenAI ""), and error's type, code and message.
func errorOf(body []byte) (top, typ, code, message string) {
	var doc struct {
		Type  string `json:"type"`
		Error struct {
			Type    string  `json:"type"`
			Code    *string `json:"code"`
			Message string  `json:"message"`
		} `json:"error"`
	}
	json.Unmarshal(body, &doc)
	return doc.Type, doc.Error.Type, deref(doc.Error.Code), doc.Error.Message
}

// Exact 401 bodies, byte for byte the Rust server's.
const (
	openAIKeyRequired    = `{"error":{"type":"auth_error","message":"API key required"}}`
	openAIKeyInvalid     = `{"error":{"type":"auth_error","message":"Invalid API key"}}`
	anthropicKeyRequired = `{"type":"error","error":{"type":"authentication_error","message":"API key required"}}`
	anthropicKeyInvalid  = `{"type":"error","error":{"type":"authentication_error","message":"Invalid API key"}}`
)

// check401 asserts a 401 with exactly the body want.
func check401(t testing.TB, label string, a relayAnswer, want string) {
	t.Helper()
	if a.err != nil || a.status != http.StatusUnauthorized || !jsonEqual(a.body, want) {
		t.Errorf("%s: %s; want 401 %s", label, a, want)
	}
}
