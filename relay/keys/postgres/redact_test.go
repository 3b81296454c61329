package postgres

import (
	"strings"
	"testing"
)

// TestRedactURL: whatever error text quotes the URL, raw or half-masked, loses its password.
func TestRedactURL(t *testing.T) {
	for _, tc := range []struct{ text, url string }{
		{`parse "postgres://u:hunter2@h:bad/x": invalid port`, "postgres://u:hunter2@h:bad/x"},
		{"cannot parse `postgres://u:xxxxx@h:bad/x`: invalid port (hunter2)", "postgres://u:hunter2@h:bad/x"},
		{"bad value hunter2&x for sslmode", "postgres://u@h:bad/x?password=hunter2&sslmode=x"},
		{"cannot parse `host=h password='hunter2 x'`: near 'hunter2 x' (hunter2 x)", "host=h password='hunter2 x' port=z"},
		{"line one hunter2\n\tline two\n\tline two", "host=h password=hunter2 port=z"},
	} {
		got := redactURL(tc.text, tc.url)
		if strings.Contains(got, "hunter2") || strings.Contains(got, "\n") {
			t.Errorf("redactURL(%q) = %q", tc.text, got)
		}
	}
}
