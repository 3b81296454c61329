package main

// --demo: the fake model server of relay/demo, in this process on a loopback port of its own,
// added to the configuration as an ordinary static backend (so it shows in /v1/models, the
// status endpoints and the metrics like any other), so that a fresh install answers.

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"modelrelay/relay/demo"
)

// demoBackend names the demo's static backend; it serves the model of the same name.
const demoBackend = "demo"

// demoServer is the running demo model server.
type demoServer struct {
	srv    httpServer
	url    string
	served chan error
}

// startDemo serves the demo model on 127.0.0.1 at a port chosen now and adds it to cfg's
// backends. The caller stops it after the relay has drained.
func startDemo(cfg *Config, log *slog.Logger) (*demoServer, error) {
	for i, b := range cfg.Backends {
		if b.Name == demoBackend {
			return nil, fmt.Errorf("config: demo: backends[%d] is already named %q; rename it or drop --demo", i, demoBackend)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("demo model: listen: %w", err)
	}
	d := &demoServer{
		// The server http_server names, as for the relay's listener: the demo is plain HTTP
		// on loopback, which either serves.
		srv:    newHTTPServer(cfg.HTTPServer, demo.New(demo.Options{Model: demoBackend}), log),
		url:    "http://" + ln.Addr().String(),
		served: make(chan error, 1),
	}
	go func() { d.served <- d.srv.Serve(ln) }()
	cfg.Backends = append(cfg.Backends, BackendConfig{Name: demoBackend, URL: d.url, Models: []string{demoBackend},
		Weight: 1, Dialects: []string{"openai", "anthropic"}})
	return d, nil
}

// stop ends the demo server. It runs after the relay's drain, so answers still streaming
// through the relay have had their time; what is left is cut after a second.
func (d *demoServer) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := d.srv.Shutdown(ctx); err != nil {
		d.srv.Close()
	}
	<-d.served // http.ErrServerClosed: the listener was ours alone, nothing else ends Serve
}

// logReady tells the operator how to call the demo model through the relay listening on addr.
func (d *demoServer) logReady(log *slog.Logger, cfg Config, addr net.Addr) {
	log.Info("demo model is up: ask the relay for model demo, in the OpenAI or the Anthropic API", "backend", d.url, "curl", demoCurl(cfg, addr))
}

// demoCurl is a command that asks the relay at addr for a chat completion from the demo.
func demoCurl(cfg Config, addr net.Addr) string {
	scheme := "http"
	if cfg.tlsListen() {
		scheme = "https"
	}
	auth := ""
	if cfg.RequireAPIKeys {
		auth = " -H 'Authorization: Bearer YOUR_KEY'"
	}
	return "curl -s " + scheme + "://" + dialable(addr) + "/v1/chat/completions -H 'Content-Type: application/json'" + auth +
		` -d '{"model":"demo","messages":[{"role":"user","content":"Hello!"}]}'`
}

// dialable is addr as a client on this machine reaches it: a wildcard listen address
// (0.0.0.0, ::) becomes loopback.
func dialable(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip.Is6() {
			host = "::1"
		}
	}
	return net.JoinHostPort(host, port)
}
