// Package pprofserve serves net/http/pprof for the relay's programs on an address of its own
// (MODELRELAY_PPROF), for profiling under load. It is off unless that address is set, and it
// never shares a public listener.
package pprofserve

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"time"
)

// EnvVar names the address to serve on, e.g. 127.0.0.1:6060.
const EnvVar = "MODELRELAY_PPROF"

// Start serves the profiles on addr until ctx is done.
func Start(ctx context.Context, addr string, log *slog.Logger) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		log.Info("pprof listening", "addr", addr)
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("pprof server stopped", "err", err)
		}
	}()
	context.AfterFunc(ctx, func() { srv.Close() })
}
