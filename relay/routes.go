package relay

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// errorShape writes an error the relay makes itself, in the shape its route's callers parse.
type errorShape func(w http.ResponseWriter, status int, message string)

// dialectErrors is the shape of an API family's routes: what its official SDKs parse.
func dialectErrors(d Dialect) errorShape {
	return func(w http.ResponseWriter, status int, message string) {
		writeError(w, d, &relayError{status: status, message: message})
	}
}

// plainErrors is the shape of the relay's own routes (admin, health, metrics): {"error": "..."}.
func plainErrors(w http.ResponseWriter, status int, message string) {
	WriteJSON(w, status, map[string]string{"error": message})
}

// routes mounts the relay's surface on a ServeMux. A path called with a method it does not take
// gets a 405 in its route's error shape: net/http's own is a line of text, which an API client
// reports as an unparseable body instead of the mistake (GET on /v1/chat/completions).
type routes struct {
	mux    *http.ServeMux
	paths  []string            // in registration order
	method map[string][]string // path -> methods it takes
	shape  map[string]errorShape
}

func newRoutes() *routes {
	return &routes{mux: http.NewServeMux(), method: map[string][]string{}, shape: map[string]errorShape{}}
}

// handle mounts h on pattern ("METHOD /path"); shape is how the path's errors look.
func (rt *routes) handle(pattern string, h http.Handler, shape errorShape) {
	rt.mux.Handle(pattern, h)
	method, path, _ := strings.Cut(pattern, " ")
	if _, seen := rt.method[path]; !seen {
		rt.paths = append(rt.paths, path)
		rt.shape[path] = shape
	}
	rt.method[path] = append(rt.method[path], method)
}

// handler mounts, for every path, the answer to the methods it does not take, and returns the
// mux. A pattern without a method is less specific than one with, so it only sees those.
func (rt *routes) handler() http.Handler {
	for _, path := range rt.paths {
		rt.mux.Handle(path, notAllowed(rt.method[path], rt.shape[path]))
	}
	return rt.mux
}

// notAllowed answers 405 with the Allow header net/http would send (HEAD where GET is taken:
// the mux serves HEAD with the GET handler).
func notAllowed(methods []string, shape errorShape) http.Handler {
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
