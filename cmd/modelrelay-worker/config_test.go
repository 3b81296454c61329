package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "worker.toml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPrecedence(t *testing.T) {
	file := writeFile(t, `
proxy_url = "http://file:1"
provider = "file-provider"
worker_secret = "file-secret"
worker_name = "file-name"
models = ["a", " b ", ""]
max_concurrency = 3
backend_url = "http://file-backend:1"
drain_timeout = 12
log_level = "debug"
log_format = "JSON"
`)
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want settings
	}{
		{
			name: "defaults",
			args: []string{"--worker-secret", "s"},
			want: settings{ProxyURL: "http://127.0.0.1:8080", WorkerSecret: "s", Provider: "local",
				WorkerName: "worker", Models: []string{"default"}, MaxConcurrency: 1,
				BackendURL: "http://127.0.0.1:8000", DrainTimeout: 30 * time.Second, LogFormat: "text"},
		},
		{
			name: "file beats defaults",
			args: []string{"--config", file},
			want: settings{ProxyURL: "http://file:1", WorkerSecret: "file-secret", Provider: "file-provider",
				WorkerName: "file-name", Models: []string{"a", "b"}, MaxConcurrency: 3,
				BackendURL: "http://file-backend:1", DrainTimeout: 12 * time.Second, LogLevel: -4, LogFormat: "json"},
		},
		{
			name: "env beats file",
			args: []string{"--config", file},
			env: map[string]string{"PROXY_URL": "https://env", "MODELS": "x, y", "MAX_CONCURRENCY": "5",
				"WORKER_SECRET": "env-secret", "PROVIDER_NAME": "env-p", "WORKER_NAME": "env-n",
				"BACKEND_URL": "http://env-b", "DRAIN_TIMEOUT_SECS": "1m", "LOG_LEVEL": "warn", "LOG_FORMAT": "text",
				"WORKER_NAME_UNRELATED": "ignored"},
			want: settings{ProxyURL: "https://env", WorkerSecret: "env-secret", Provider: "env-p",
				WorkerName: "env-n", Models: []string{"x", "y"}, MaxConcurrency: 5,
				BackendURL: "http://env-b", DrainTimeout: time.Minute, LogLevel: 4, LogFormat: "text"},
		},
		{
			name: "flags beat env",
			args: []string{"--config", file, "--models", "*", "--max-concurrency=7", "-worker-secret", "flag",
				"--proxy-url", "http://flag", "--drain-timeout", "0", "--log-level", "ERROR", "--log-format", "Json"},
			env: map[string]string{"MODELS": "x", "MAX_CONCURRENCY": "5", "WORKER_SECRET": "env",
				"PROXY_URL": "http://env", "LOG_FORMAT": "text"},
			want: settings{ProxyURL: "http://flag", WorkerSecret: "flag", Provider: "file-provider",
				WorkerName: "file-name", Models: []string{"*"}, MaxConcurrency: 7,
				BackendURL: "http://file-backend:1", DrainTimeout: 0, LogLevel: 8, LogFormat: "json"},
		},
		{
			name: "empty env counts as unset",
			args: []string{"--config", file},
			env:  map[string]string{"WORKER_SECRET": "", "MODELS": "", "LOG_FORMAT": ""},
			want: settings{ProxyURL: "http://file:1", WorkerSecret: "file-secret", Provider: "file-provider",
				WorkerName: "file-name", Models: []string{"a", "b"}, MaxConcurrency: 3,
				BackendURL: "http://file-backend:1", DrainTimeout: 12 * time.Second, LogLevel: -4, LogFormat: "json"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := load(tt.args, envOf(tt.env))
			if err != nil {
				t.Fatal(err)
			}
			if got.ProxyURL != tt.want.ProxyURL || got.WorkerSecret != tt.want.WorkerSecret ||
				got.Provider != tt.want.Provider || got.WorkerName != tt.want.WorkerName ||
				strings.Join(got.Models, "|") != strings.Join(tt.want.Models, "|") ||
				got.MaxConcurrency != tt.want.MaxConcurrency || got.BackendURL != tt.want.BackendURL ||
				got.DrainTimeout != tt.want.DrainTimeout || got.LogLevel != tt.want.LogLevel ||
				got.LogFormat != tt.want.LogFormat {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name, file string
		args       []string
		env        map[string]string
		want       string
	}{
		{name: "missing secret", want: "worker secret is required"},
		{name: "bad toml", file: "worker_secret = \n[x", want: "parse config"},
		{name: "missing file", args: []string{"--config", "/nonexistent/w.toml"}, want: "read config"},
		{name: "models not strings", file: "worker_secret='s'\nmodels=[1]", want: "models must be"},
		{name: "table as scalar", file: "worker_secret='s'\n[provider]\nx=1", want: "provider must be a single value"},
		{name: "zero concurrency", env: map[string]string{"WORKER_SECRET": "s", "MAX_CONCURRENCY": "0"}, want: "max-concurrency"},
		{name: "word concurrency", env: map[string]string{"WORKER_SECRET": "s", "MAX_CONCURRENCY": "lots"}, want: "max-concurrency"},
		{name: "bad drain", env: map[string]string{"WORKER_SECRET": "s", "DRAIN_TIMEOUT_SECS": "-3s"}, want: "drain-timeout"},
		{name: "bad level", env: map[string]string{"WORKER_SECRET": "s", "LOG_LEVEL": "loud"}, want: "log-level"},
		{name: "bad format", env: map[string]string{"WORKER_SECRET": "s", "LOG_FORMAT": "xml"}, want: `log-format must be text or json, got "xml"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			if tt.file != "" {
				args = append(args, "--config", writeFile(t, tt.file))
			}
			_, err := load(args, envOf(tt.env))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
		})
	}
}

func TestUnknownFileKeysAreReported(t *testing.T) {
	s, err := load([]string{"--config", writeFile(t, "worker_secret='s'\nmax_concurency=2")}, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(s.UnknownKeys, ",") != "max_concurency" {
		t.Errorf("unknown keys %q", s.UnknownKeys)
	}
}

func TestRunExitCodes(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		env      map[string]string
		code     int
		out, err string
	}{
		{"help", []string{"--help"}, nil, 0, "--worker-secret SECRET", ""},
		{"version", []string{"--version"}, nil, 0, "modelrelay-worker dev (unknown)\n", ""},
		{"missing secret", nil, nil, 1, "", "modelrelay-worker: worker secret is required"},
		{"bad flag", []string{"--nope"}, nil, 2, "", "--help"},
		{"stray argument", []string{"extra"}, map[string]string{"WORKER_SECRET": "s"}, 2, "", "unexpected argument"},
		{"bad proxy url", []string{"--proxy-url", "ftp://x"}, map[string]string{"WORKER_SECRET": "s"}, 1, "", "proxy url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(context.Background(), func() {}, tt.args, envOf(tt.env), &out, &errOut)
			if code != tt.code || !strings.Contains(out.String(), tt.out) || !strings.Contains(errOut.String(), tt.err) {
				t.Fatalf("code %d stdout %q stderr %q", code, out.String(), errOut.String())
			}
			if tt.code != 0 && strings.Count(errOut.String(), "\n") != 1 {
				t.Errorf("stderr is not one line: %q", errOut.String())
			}
		})
	}
}

// TestSignalDrainsAndExitsZero runs the whole program against a server that is not there: the
// signal must still end it promptly with status 0, and the secret must never be logged.
func TestSignalDrainsAndExitsZero(t *testing.T) {
	signals, signal := context.WithCancel(context.Background())
	var errOut bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(signals, func() {}, []string{"--proxy-url", "http://u:hunter3@127.0.0.1:1", "--log-level", "debug"},
			envOf(map[string]string{"WORKER_SECRET": "hunter2"}), &bytes.Buffer{}, &errOut)
	}()
	signal()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("did not exit after the signal")
	}
	if strings.Contains(errOut.String(), "hunter2") || strings.Contains(errOut.String(), "hunter3") {
		t.Errorf("secret logged: %s", errOut.String())
	}
}

// TestUsageLayout: --help reads like the server's: sections of flags, each flag's name in a
// 30-column field with its description at column 33, its variable and default on the line
// below, nothing wider than 90 columns.
func TestUsageLayout(t *testing.T) {
	var out bytes.Buffer
	usage(&out)
	text := out.String()
	for _, o := range options {
		if !strings.Contains(text, "\n  --"+o.flag+" "+o.meta+" ") || !strings.Contains(text, "env "+o.env+", default ") {
			t.Errorf("usage misses --%s %s or env %s", o.flag, o.meta, o.env)
		}
	}
	for _, s := range []string{"\nRelay:\n", "\nBackend:\n", "\nShutdown:\n", "\nLogging:\n", "\nConfig file:\n",
		"--config FILE", "-h, --help", "--version", "\nExample:\n"} {
		if !strings.Contains(text, s) {
			t.Errorf("usage misses %q", s)
		}
	}
	column := strings.Repeat(" ", 33)
	inFlags := false
	for i, line := range strings.Split(text, "\n") {
		if len(line) > 90 {
			t.Errorf("usage line %d is %d columns: %q", i+1, len(line), line)
		}
		switch {
		case strings.HasSuffix(line, ":") && !strings.HasPrefix(line, " "):
			inFlags = line != "Example:"
		case !inFlags || line == "":
		case strings.HasPrefix(line, "  -"):
			if len(line) < 34 || line[32] != ' ' || line[33] == ' ' {
				t.Errorf("usage line %d: description not at column 33: %q", i+1, line)
			}
		case !strings.HasPrefix(line, column) || line[33] == ' ':
			t.Errorf("usage line %d: continuation not at column 33: %q", i+1, line)
		}
	}
}

// TestJSONLogs: --log-format json writes one JSON object a line, and durations read as Go
// duration text ("30s"), not nanoseconds.
func TestJSONLogs(t *testing.T) {
	signals, signal := context.WithCancel(context.Background())
	signal() // the program starts, finds the signal, drains and stops
	var errOut bytes.Buffer
	code := run(signals, func() {}, []string{"--proxy-url", "http://127.0.0.1:1", "--log-format", "json"},
		envOf(map[string]string{"WORKER_SECRET": "s"}), &bytes.Buffer{}, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var draining map[string]any
	for _, line := range strings.Split(strings.TrimSpace(errOut.String()), "\n") {
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("log line %q is not JSON: %v", line, err)
		}
		if strings.HasPrefix(fmt.Sprint(v["msg"]), "shutting down") {
			draining = v
		}
	}
	if draining == nil || draining["timeout"] != "30s" {
		t.Fatalf("drain line %v, want timeout \"30s\" in:\n%s", draining, errOut.String())
	}
}
