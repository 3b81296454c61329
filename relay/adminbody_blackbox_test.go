package relay_test

import (
	"net/http"
	"strings"
	"testing"

	"modelrelay/relay"
)

// An admin body the relay cannot read is answered with what is wrong in the body's own terms,
// never encoding/json's text (which names the relay's Go types).
func TestAdminBodyErrorsSayWhatIsWrong(t *testing.T) {
	ts, _ := keyedRelay(t, relay.Options{}, "m")
	id := createKey(t, ts, "")["id"].(string)
	for _, c := range []struct{ method, path, body, want string }{
		{http.MethodPost, "/admin/keys", `{"name":1}`, "name must be a string"},
		{http.MethodPost, "/admin/keys", `[]`, "request body must be an object"},
		{http.MethodPost, "/admin/keys", `not json`, "request body is not valid JSON (at byte 2)"},
		{http.MethodPost, "/admin/keys", ``, "request body is empty"},
		{http.MethodPost, "/admin/keys", `{"name":"` + strings.Repeat("x", 70<<10) + `"}`, "request body exceeds 65536 bytes"},
		{http.MethodPatch, "/admin/keys/" + id, `"limits"`, "request body must be an object"},
		{http.MethodPatch, "/admin/keys/" + id, `{"rate_limit_rpm":"5"}`, "rate_limit_rpm must be a non-negative integer or null"},
	} {
		status, v := callJSON(t, ts, c.method, c.path, adminToken, c.body)
		if msg, _ := v["error"].(string); status != http.StatusBadRequest || msg != c.want {
			t.Errorf("%s %s %.40s: %d %v, want 400 %q", c.method, c.path, c.body, status, v, c.want)
		}
	}
}
