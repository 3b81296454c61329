package api

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"modelrelay/relay"
)

// routes mounts the relay's surface on a ServeMux. A path called with a method it does not take
// gets a 405 in its route's error shape: net/http's own is a line of text, which an API client
// reports as an unparseable body instead of the mistake (GET on /v1/chat/completions).
type routes struct {
	mux    *http.ServeMux
	paths  []string           // in registration order
	byPath map[string][]route // path -> the methods it takes, each with its handler
	shape  map[string]relay.ErrorShape
}

func newRoutes() *routes {
	return &routes{mux: http.NewServeMux(), byPath: map[string][]route{}, shape: map[string]relay.ErrorShape{}}
}

// handle mounts h on pattern ("METHOD /path"); shape is how the path's errors look.
func (rt *routes) handle(pattern string, h http.Handler, shape relay.ErrorShape) {
	rt.mux.Handle(pattern, h)
	method, path, _ := strings.Cut(pattern, " ")
	if _, seen := rt.byPath[path]; !seen {
		rt.paths = append(rt.paths, path)
		rt.shape[path] = shape
	}
	rt.byPath[path] = append(rt.byPath[path], route{method, h})
}

// serve mounts, for every path, the answer to the methods it does not take, and returns the
// surface. A pattern without a method is less specific than one with, so it only sees those.
func (rt *routes) serve() http.Handler {
	exact := make(map[string]route)
	hosts := false
	for _, path := range rt.paths {
		taken := rt.byPath[path]
		methods := make([]string, len(taken))
		for i, r := range taken {
			methods[i] = r.method
		}
		rt.mux.Handle(path, notAllowed(methods, rt.shape[path]))
		hosts = hosts || !strings.HasPrefix(path, "/")
		if len(taken) == 1 && taken[0].method != "" && plainPath(path) {
			exact[path] = taken[0]
		}
	}
	if hosts {
		exact = nil // a pattern with a host outranks a path alone: only the mux decides
	}
	return &router{exact: exact, mux: rt.mux}
}

// plainPath reports whether a pattern's path matches one request path only: no wildcard, no
// subtree, nothing the mux would clean or unescape.
func plainPath(path string) bool {
	return strings.HasPrefix(path, "/") && !strings.HasSuffix(path, "/") &&
		!strings.ContainsAny(path, "{}%") && !strings.Contains(path, "//") && !strings.Contains(path, "/.")
}

// route is a method a path takes and its handler.
type route struct {
	method  string
	handler http.Handler
}

// router answers a request for a plain path with its only method (every inference call) from
// a map, and the rest from the mux, which would pick the same handler for those requests
// after cleaning, unescaping and matching the path (BenchmarkRoute: about 30 ns against
// 300). A request routed so has no r.Pattern; no handler here reads it.
type router struct {
	exact map[string]route
	mux   *http.ServeMux
}

func (rt *router) ServeHTTP(w http.ResponseWriter, r *http.Request) { rt.handler(r).ServeHTTP(w, r) }

// handler is r's handler when the map has it, else the mux (which then picks one).
func (rt *router) handler(r *http.Request) http.Handler {
	if e, ok := rt.exact[r.URL.Path]; ok && r.Method == e.method && r.URL.RawPath == "" {
		return e.handler
	}
	return rt.mux
}

// notAllowed answers 405 with the Allow header net/http would send (HEAD where GET is taken:
// the mux serves HEAD with the GET handler).
func notAllowed(methods []string, shape relay.ErrorShape) http.Handler {
	allow := slices.Clone(methods)
	if slices.Contains(allow, http.MethodGet) {
		allow = append(allow, http.MethodHead)
	}
	slices.Sort(allow)
	allow = slices.Compact(allow)
	list := strings.Join(allow, ", ")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", list)
		shape(w, http.StatusMethodNotAllowed,
			fmt.Sprintf("method %s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, list))
	})
}
