package ui

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func serve(t *testing.T, method, path string, header http.Header) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, path, nil)
	for k, v := range header {
		r.Header[k] = v
	}
	w := httptest.NewRecorder()
	Handler().ServeHTTP(w, r)
	return w
}

func TestPageFiles(t *testing.T) {
	for _, tc := range []struct {
		path, contentType, contains string
	}{
		{"/ui/", "text/html; charset=utf-8", `<script src="app.js" defer></script>`},
		{"/ui/index.html", "text/html; charset=utf-8", `<form id="login">`},
		{"/ui/app.js", "text/javascript; charset=utf-8", "sessionStorage"},
		{"/ui/style.css", "text/css; charset=utf-8", ".sparkline"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			w := serve(t, http.MethodGet, tc.path, nil)
			if w.Code != http.StatusOK {
				t.Fatalf("status %d, want 200", w.Code)
			}
			if got := w.Header().Get("Content-Type"); got != tc.contentType {
				t.Errorf("Content-Type %q, want %q", got, tc.contentType)
			}
			if !strings.Contains(w.Body.String(), tc.contains) {
				t.Errorf("body does not contain %q", tc.contains)
			}
			csp := w.Header().Get("Content-Security-Policy")
			for _, directive := range []string{"script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
				if !strings.Contains(csp, directive) {
					t.Errorf("Content-Security-Policy %q lacks %q", csp, directive)
				}
			}
			if w.Header().Get("X-Content-Type-Options") != "nosniff" {
				t.Error("no X-Content-Type-Options: nosniff")
			}
		})
	}
}

// The page's links are relative to /ui/, so /ui must lead there, relatively (a proxy may
// mount the relay under a path of its own).
func TestBarePathRedirects(t *testing.T) {
	w := serve(t, http.MethodGet, "/ui", nil)
	if w.Code != http.StatusMovedPermanently || w.Header().Get("Location") != "ui/" {
		t.Fatalf("status %d Location %q, want 301 to ui/", w.Code, w.Header().Get("Location"))
	}
}

func TestUnknownFile(t *testing.T) {
	for _, path := range []string{"/ui/missing.js", "/ui/../go.mod", "/ui/sub/app.js", "/ui/ui.go"} {
		if w := serve(t, http.MethodGet, path, nil); w.Code != http.StatusNotFound {
			t.Errorf("%s: status %d, want 404", path, w.Code)
		}
	}
}

// A browser revalidates on every load (no-cache) and gets 304 while the file is unchanged.
func TestRevalidation(t *testing.T) {
	first := serve(t, http.MethodGet, "/ui/app.js", nil)
	etag := first.Header().Get("ETag")
	if etag == "" || first.Header().Get("Cache-Control") != "no-cache" {
		t.Fatalf("ETag %q Cache-Control %q, want an ETag and no-cache", etag, first.Header().Get("Cache-Control"))
	}
	again := serve(t, http.MethodGet, "/ui/app.js", http.Header{"If-None-Match": {etag}})
	if again.Code != http.StatusNotModified {
		t.Fatalf("status %d with If-None-Match, want 304", again.Code)
	}
	if other := serve(t, http.MethodGet, "/ui/style.css", nil).Header().Get("ETag"); other == etag {
		t.Fatalf("style.css and app.js share ETag %s", etag)
	}
}

// Nothing in the page may reach past the relay: no CDN, no web fonts, no inline script or
// handler attributes (the Content-Security-Policy would block them anyway).
func TestNoOutsideReferences(t *testing.T) {
	for _, name := range []string{"index.html", "app.js", "style.css"} {
		body, err := files.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		text := string(body)
		for _, banned := range []string{"http://", "https://", "//cdn", "@import", "url(", "onclick=", "onsubmit=", "innerHTML", "eval("} {
			if strings.Contains(text, banned) {
				t.Errorf("%s contains %q", name, banned)
			}
		}
	}
}
