package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Bench holds what every row's setup needs: where things live and who owns the processes.
type Bench struct {
	ctx      context.Context
	repoRoot string
	tmp      string
	children *Children
	tools    *Tools
	upstream string // 127.0.0.1:port of the fake model server
	bins     relayBinaries
	logf     func(format string, args ...any)
}

// proxySpec says how to run one public proxy with its rendered config.
type proxySpec struct {
	row, binary, pkg, template string
	args                       func(config string) []string
	env                        func(dir string) []string
}

var publicProxies = []proxySpec{
	{row: "nginx", binary: "nginx", pkg: "nginx", template: "nginx.conf",
		args: func(c string) []string {
			return []string{"-c", c, "-e", filepath.Join(filepath.Dir(c), "nginx-error.log")}
		}},
	{row: "HAProxy", binary: "haproxy", pkg: "haproxy", template: "haproxy.cfg",
		args: func(c string) []string { return []string{"-db", "-f", c} }},
	{row: "Caddy", binary: "caddy", pkg: "caddy", template: "Caddyfile",
		args: func(c string) []string { return []string{"run", "--config", c, "--adapter", "caddyfile"} },
		// Caddy keeps state under $HOME / XDG dirs; keep it inside the temp dir.
		env: func(d string) []string {
			return []string{"HOME=" + d, "XDG_DATA_HOME=" + d, "XDG_CONFIG_HOME=" + d}
		}},
}

// startProxy installs (if needed), configures and starts one public proxy.
func (b *Bench) startProxy(spec proxySpec) (Target, error) {
	return b.startProxyAs(spec, spec.binary, nil)
}

// startProxyAs starts spec under label (its temp dir and log name); edit, when set, changes
// the rendered config before the proxy reads it.
func (b *Bench) startProxyAs(spec proxySpec, label string, edit func(config string) error) (Target, error) {
	path, err := b.tools.Find(spec.binary, spec.pkg)
	if err != nil {
		return Target{}, err
	}
	dir := filepath.Join(b.tmp, label)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Target{}, fmt.Errorf("temp dir for %s: %w", spec.row, err)
	}
	listen, err := FreePort()
	if err != nil {
		return Target{}, err
	}
	config, err := renderTemplate(b.repoRoot, dir, spec.template,
		templateData{Dir: dir, Listen: listen, Upstream: b.upstream})
	if err != nil {
		return Target{}, err
	}
	if edit != nil {
		if err := edit(config); err != nil {
			return Target{}, err
		}
	}
	var env []string
	if spec.env != nil {
		env = spec.env(dir)
	}
	cmd, err := b.children.Start(label, env, path, spec.args(config)...)
	if err != nil {
		return Target{}, err
	}
	if err := WaitHTTP(b.ctx, "http://"+listen+"/v1/models", "", 200, 15*time.Second); err != nil {
		b.children.Stop(cmd)
		return Target{}, fmt.Errorf("%s did not come up (see %s.log in %s): %w", spec.row, label, b.tmp, err)
	}
	return Target{Row: spec.row, Addr: listen, PIDs: []int{cmd.Process.Pid},
		stop: func() { b.children.Stop(cmd) }}, nil
}
