package main

// Portkey's AI gateway (a Node service, npm @portkey-ai/gateway) as a row: an LLM gateway beside
// the plain proxies. It routes by request headers: x-portkey-provider names the provider's
// protocol and x-portkey-custom-host the base URL it is reached at, here the fake upstream.

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
)

// portkeyConfig holds package.json and package-lock.json: the gateway and every package under
// it pinned, and why one of them is held back.
const portkeyConfig = "configs/bench/portkey"

// portkeyScript is the gateway's entry point inside the installed tree.
const portkeyScript = "node_modules/@portkey-ai/gateway/build/start-server.js"

// Portkey returns node and the gateway's entry point, installing the pinned tree with npm ci on
// first use. It goes into the user's cache under a name taken from the pinned files, so a
// later run uses it offline and a new pin installs afresh beside it; nothing lands in the
// repository.
func (t *Tools) Portkey(repoRoot string) (node, script string, err error) {
	if node, err = t.Find("node", "nodejs"); err != nil {
		return "", "", err
	}
	src := filepath.Join(repoRoot, portkeyConfig)
	sum := sha256.New()
	for _, name := range []string{"package.json", "package-lock.json"} {
		raw, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			return "", "", fmt.Errorf("portkey: %w", err)
		}
		sum.Write(raw)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", "", fmt.Errorf("portkey: no cache dir to install into: %w", err)
	}
	dir := filepath.Join(cache, "modelrelay-bench", "portkey-"+hex.EncodeToString(sum.Sum(nil)[:6]))
	script = filepath.Join(dir, portkeyScript)
	if _, err := os.Stat(script); err == nil {
		return node, script, nil
	}
	if t.skipInstall {
		return "", "", fmt.Errorf("portkey not installed in %s and -skip-install is set", dir)
	}
	npm, err := t.Find("npm", "npm")
	if err != nil {
		return "", "", err
	}
	// Installed beside its final place and renamed when whole, so an interrupted install is
	// never taken for a finished one.
	partial := dir + ".partial"
	os.RemoveAll(partial)
	if err := os.MkdirAll(partial, 0o755); err != nil {
		return "", "", fmt.Errorf("portkey: %w", err)
	}
	for _, name := range []string{"package.json", "package-lock.json"} {
		raw, _ := os.ReadFile(filepath.Join(src, name))
		if err := os.WriteFile(filepath.Join(partial, name), raw, 0o644); err != nil {
			return "", "", fmt.Errorf("portkey: %w", err)
		}
	}
	t.log("installing Portkey's gateway (npm ci of %s) into %s", portkeyConfig, dir)
	cmd := exec.Command(npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = partial
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("portkey: npm ci: %w: %s", err, lastLine(string(out)))
	}
	if err := os.Rename(partial, dir); err != nil {
		return "", "", fmt.Errorf("portkey: %w", err)
	}
	return node, script, nil
}

// startPortkey runs the gateway on a port of our choosing, routed to the fake upstream.
func (b *Bench) startPortkey() (Target, error) {
	node, script, err := b.tools.Portkey(b.repoRoot)
	if err != nil {
		return Target{}, err
	}
	listen, err := FreePort()
	if err != nil {
		return Target{}, err
	}
	_, port, _ := net.SplitHostPort(listen)
	dir := filepath.Join(b.tmp, "portkey")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Target{}, fmt.Errorf("temp dir for portkey: %w", err)
	}
	// --port is what its listener takes (it reads PORT from the environment but listens on
	// the flag, or on 8787); it listens on every address, and is only driven over loopback.
	// --headless and NODE_ENV=production leave out its web console, as a deployment would.
	env := []string{"NODE_ENV=production", "HOME=" + dir}
	cmd, err := b.children.Start("portkey", env, node, script, "--port="+port, "--headless")
	if err != nil {
		return Target{}, err
	}
	t := Target{Row: "Portkey", Addr: listen, PIDs: []int{cmd.Process.Pid},
		Header: http.Header{"X-Portkey-Provider": {"openai"}, "X-Portkey-Custom-Host": {"http://" + b.upstream + "/v1"}},
		Note:   "Portkey: one Node process (the gateway runs on one core); it waits 25 ms before a stream's first event",
		stop:   func() { b.children.Stop(cmd) }}
	if err := waitCompletion(b, t); err != nil {
		t.Stop()
		return Target{}, fmt.Errorf("portkey not serving (see portkey.log in %s): %w", b.tmp, err)
	}
	return t, nil
}
