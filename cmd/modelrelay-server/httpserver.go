package main

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"time"

	"modelrelay/relay/h1"
)

// httpServer serves HTTP on a listener until Shutdown (which waits for the requests in
// flight) or Close: net/http's server or relay/h1's lean one, as http_server says.
type httpServer interface {
	Serve(ln net.Listener) error
	Shutdown(ctx context.Context) error
	Close() error
}

// The listeners' limits, the same on either server: a client has 10 s to send a request's
// head, and a kept-alive connection waits 2 min for its next request.
const (
	readHeaderTimeout = 10 * time.Second
	idleTimeout       = 2 * time.Minute
)

// newHTTPServer builds the server kind (a validated http_server) for h. What the server
// itself has to say (a handler's panic, a failed accept, a TLS handshake) goes to log at
// debug: a client's broken connection is no operator's concern.
func newHTTPServer(kind string, h http.Handler, log *slog.Logger) httpServer {
	errorLog := slog.NewLogLogger(log.Handler(), slog.LevelDebug)
	if kind == "lean" {
		return &h1.Server{Handler: h, ReadHeaderTimeout: readHeaderTimeout, IdleTimeout: idleTimeout, ErrorLog: errorLog}
	}
	return &http.Server{Handler: h, ReadHeaderTimeout: readHeaderTimeout, IdleTimeout: idleTimeout, ErrorLog: errorLog}
}
