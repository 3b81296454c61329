package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"text/template"
)

// Target is one row of the table: an address the load generators hit, the Host header they
// send, and the processes whose CPU and memory count as that proxy's cost.
type Target struct {
	Row  string
	Addr string // 127.0.0.1:port
	Host string // Host header; empty means Addr
	// Header is sent with every request besides Content-Type: what a row needs to route it
	// (Portkey reads the provider and the upstream from headers).
	Header http.Header
	PIDs   []int  // roots of the process trees measured; none for the direct row
	Note   string // a caveat printed under the table
	// Pprof are the row's processes that serve net/http/pprof (-pprof), profiled after the
	// measurements.
	Pprof []pprofEndpoint
	stop  func() // ends every process this row started
}

// Stop ends the row's processes; safe on the direct row, which owns none.
func (t Target) Stop() {
	if t.stop != nil {
		t.stop()
	}
}

// templateData fills the configs/bench templates.
type templateData struct {
	Dir      string // the proxy's private temp dir
	Listen   string // 127.0.0.1:port the proxy serves on
	Upstream string // 127.0.0.1:port of the fake model server
	// HTTPServer is the relay's http_server (relay-static.yaml); empty for other templates.
	HTTPServer string
}

// renderTemplate writes configs/bench/<name>.tmpl, filled with data, to dir/<name>.
func renderTemplate(repoRoot, dir, name string, data templateData) (string, error) {
	src := filepath.Join(repoRoot, "configs", "bench", name+".tmpl")
	tmpl, err := template.ParseFiles(src)
	if err != nil {
		return "", fmt.Errorf("read template %s: %w", src, err)
	}
	out := filepath.Join(dir, name)
	f, err := os.Create(out)
	if err != nil {
		return "", fmt.Errorf("write %s: %w", out, err)
	}
	defer f.Close()
	if err := tmpl.Execute(f, data); err != nil {
		return "", fmt.Errorf("fill template %s: %w", src, err)
	}
	return out, nil
}

// findRepoRoot walks up from the working directory to the directory holding go.mod.
func findRepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory; run from the repository")
		}
		dir = parent
	}
}
