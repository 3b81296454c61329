// Package ui is the relay's live status page: three static files embedded in the binary and
// served under /ui/. The page holds no server state and needs no token to load; it asks the
// admin API for everything it shows, with the admin token the operator typed into it.
package ui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed index.html app.js style.css
var files embed.FS

// Prefix is where the page lives. Its own links are relative to it, so a proxy that mounts
// the relay under a path keeps them working.
const Prefix = "/ui/"

// asset is one embedded file with what its answer needs, computed once.
type asset struct {
	body        []byte
	contentType string
	etag        string
}

// policy lets the page load its own script and style and call its own origin, nothing else:
// the admin token sits in the page, so no other script may run next to it.
const policy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'none'; base-uri 'none'; frame-ancestors 'none'"

// Handler serves the page: GET /ui redirects to /ui/ (so relative links resolve), /ui/ is
// index.html and /ui/<name> the other files. Mount it on both "/ui" and "/ui/".
func Handler() http.Handler {
	assets := map[string]asset{}
	entries, _ := files.ReadDir(".")
	for _, e := range entries {
		body, _ := files.ReadFile(e.Name())
		sum := sha256.Sum256(body)
		assets[e.Name()] = asset{body: body, contentType: mime.TypeByExtension(path.Ext(e.Name())),
			etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := strings.CutPrefix(r.URL.Path, Prefix)
		if !ok {
			// Relative, so it also lands right under a proxy's path prefix.
			w.Header().Set("Location", "ui/")
			w.WriteHeader(http.StatusMovedPermanently)
			return
		}
		if name == "" {
			name = "index.html"
		}
		a, ok := assets[name]
		if !ok {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Type", a.contentType)
		h.Set("Content-Security-Policy", policy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		// Revalidated on every load: a new relay version must not run an old script.
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", a.etag)
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(a.body))
	})
}
