package main

import (
	"fmt"
	"os"
	"regexp"
)

// startHeldRow starts a fresh copy of the row under key, sized for plan.n held streams, with a fake
// upstream of its own; stop ends both.
//
// Fresh, because a Go heap keeps freed spans resident for a while after the main table's load,
// and they would soak up part of the streams' memory unseen. Its own upstream, because each row
// opens n connections to it from 127.0.0.1: a new address per row keeps the previous row's
// TIME_WAIT connections from crowding the ephemeral ports.
func (b *Bench) startHeldRow(key string, plan heldPlan) (Target, func(), error) {
	addr, up, err := b.startFakeUpstream("upstream-held-" + key)
	if err != nil {
		return Target{}, nil, err
	}
	hb := *b
	hb.upstream = addr
	var t Target
	switch key {
	case "nginx":
		t, err = hb.startProxyAs(publicProxies[0], "nginx-held", func(config string) error {
			return editFile(config, func(conf string) (string, error) { return nginxHeldConf(conf, plan) })
		})
	case "portkey":
		t, err = hb.startPortkey()
	case "static":
		t, err = hb.startRelayStatic(relayStatic, false)
	case "static-lean":
		t, err = hb.startRelayStatic(relayStaticLean, false)
	case "circuit":
		t, err = hb.startRelayCircuit()
	case "worker":
		// One request slot per stream: the daemon would queue the rest, and a queued request
		// is not a held stream.
		t, err = hb.startRelayWorker(max(workerSlots, plan.n), false)
	default:
		err = fmt.Errorf("no held-streams setup for row %q", key)
	}
	if err != nil {
		b.children.Stop(up)
		return Target{}, nil, err
	}
	return t, func() { t.Stop(); b.children.Stop(up) }, nil
}

var (
	nginxWorkerConns = regexp.MustCompile(`(?m)^(\s*)worker_connections\s+\d+;`)
	nginxEvents      = regexp.MustCompile(`(?m)^events\s*\{`)
)

// nginxHeldConf raises configs/bench/nginx.conf.tmpl's limits for plan.n held streams: each is
// two connections (client and upstream) in one worker, and one worker may accept them all. The
// main table keeps the template's 4096, which its 64 connections and 200 streams never reach;
// a larger connection array would only add to nginx's RSS there.
func nginxHeldConf(conf string, plan heldPlan) (string, error) {
	if !nginxWorkerConns.MatchString(conf) || !nginxEvents.MatchString(conf) {
		return "", fmt.Errorf("nginx config for held streams: no worker_connections line in an events block to raise")
	}
	conf = nginxWorkerConns.ReplaceAllString(conf, fmt.Sprintf("${1}worker_connections %d;", 2*plan.n+heldFDMargin/2))
	// worker_rlimit_nofile belongs to the main context, before the events block.
	loc := nginxEvents.FindStringIndex(conf)
	return conf[:loc[0]] + fmt.Sprintf("worker_rlimit_nofile %d;\n\n", plan.fdLimit) + conf[loc[0]:], nil
}

// editFile rewrites path through edit.
func editFile(path string, edit func(string) (string, error)) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	out, err := edit(string(raw))
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
