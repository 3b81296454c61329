// Command floorproxy is the floor rows of modelrelay-bench: a featureless reverse proxy built
// from the relay's own parts (relay/h1's client, and net/http's server or relay/h1's lean one),
// with no routing, no JSON, no metrics. What it costs is what any Go proxy made of those parts
// costs; what the relay costs beyond it is the relay's own stages.
//
//	floorproxy -listen 127.0.0.1:9000 -upstream 127.0.0.1:8000 [-server net/http|lean]
//
// Every request goes to the upstream with the client's method, path, query and header fields
// as given (hop-by-hop ones included), and the answer's status, header fields and body come
// back as given.
package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"modelrelay/relay/h1"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "floorproxy:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("floorproxy", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "address to serve on")
	upstream := fs.String("upstream", "", "upstream to forward to: host:port or http://host:port")
	kind := fs.String("server", "net/http", "HTTP server: net/http or lean (relay/h1.Server)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	up, err := upstreamURL(*upstream)
	if err != nil {
		return err
	}
	srv, err := newServer(*kind, newHandler(up))
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	// SIGTERM ends the process at once: the bench stops its rows that way, and a floor has no
	// answers in flight worth draining.
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// upstreamURL takes host:port (as the bench passes it) or an http URL; the request target
// always comes from the client, so a path in it is ignored.
func upstreamURL(s string) (*url.URL, error) {
	if s == "" {
		return nil, errors.New("-upstream is required")
	}
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("-upstream %q: want host:port or http://host:port", s)
	}
	return u, nil
}

// server is what both kinds of server offer: *http.Server and *h1.Server.
type server interface {
	Serve(ln net.Listener) error
	Close() error
}

// The servers' limits are the relay's own (cmd/modelrelay-server): a client has 10 s to send
// a request's head, and a kept-alive connection waits 2 min for its next request.
const (
	readHeaderTimeout = 10 * time.Second
	idleTimeout       = 2 * time.Minute
)

// newServer builds the server kind serves h with: "net/http" or "lean".
func newServer(kind string, h http.Handler) (server, error) {
	switch kind {
	case "net/http":
		return &http.Server{Handler: h, ReadHeaderTimeout: readHeaderTimeout, IdleTimeout: idleTimeout}, nil
	case "lean":
		return &h1.Server{Handler: h, ReadHeaderTimeout: readHeaderTimeout, IdleTimeout: idleTimeout}, nil
	}
	return nil, fmt.Errorf("-server %q: want net/http or lean", kind)
}
