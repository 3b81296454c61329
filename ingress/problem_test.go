package ingress

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestProblemWireShape(t *testing.T) {
	cases := []struct {
		p      *Problem
		status int
		body   string
	}{
		{UnknownSubdomain("nope"), 400, `{"type":"https://api.backend.ai/probs/generic-bad-request","title":"Bad request.","msg":"E20009: Subdomain nope not registered","error":{"message":"E20009: Subdomain nope not registered","type":"invalid_request_error","code":"subdomain_not_registered"}}`},
		{noAuthorization(), 401, `{"type":"https://api.backend.ai/probs/invalid-credentials","title":"Authentication credentials not valid.","msg":"E20006: Authorization header not provided","error":{"message":"E20006: Authorization header not provided","type":"authentication_error","code":"authorization_missing"}}`},
		{unsupportedScheme("Basic"), 401, `{"type":"https://api.backend.ai/probs/invalid-credentials","title":"Authentication credentials not valid.","msg":"E20007: Unsupported authorization method Basic","error":{"message":"E20007: Unsupported authorization method Basic","type":"authentication_error","code":"unsupported_authorization_method"}}`},
		{invalidToken(reasonExpired), 401, `{"type":"https://api.backend.ai/probs/invalid-credentials","title":"Authentication credentials not valid.","msg":"E20008: Invalid authorization token (Signature has expired)","error":{"message":"E20008: Invalid authorization token (Signature has expired)","type":"authentication_error","code":"invalid_token"}}`},
		{tokenMismatch(), 401, `{"type":"https://api.backend.ai/probs/invalid-credentials","title":"Authentication credentials not valid.","msg":"E20009: Authorization token mismatch","error":{"message":"E20009: Authorization token mismatch","type":"authentication_error","code":"token_mismatch"}}`},
		{ClientIPNotAllowed(), 403, `{"type":"https://api.backend.ai/probs/client-ip-not-allowed","title":"Client address not allowed.","msg":"E20011: Client address not allowed","error":{"message":"E20011: Client address not allowed","type":"permission_error","code":"client_ip_not_allowed"}}`},
		{WorkerNotAvailable(), 503, `{"type":"https://api.backend.ai/probs/appproxy/worker-not-available","title":"Worker not available.","msg":"Worker not available.","error":{"message":"Worker not available.","type":"server_error","code":"worker_not_available"}}`},
		{ContainerConnectionRefused(), 502, `{"type":"https://api.backend.ai/probs/appproxy/container-connection-refused","title":"Cannot connect to Backend.AI kernel.","msg":"Cannot connect to Backend.AI kernel.","error":{"message":"Cannot connect to Backend.AI kernel.","type":"upstream_error","code":"container_connection_refused"}}`},
	}
	for _, tc := range cases {
		w := httptest.NewRecorder()
		tc.p.ServeHTTP(w, nil)
		if w.Code != tc.status || w.Body.String() != tc.body {
			t.Errorf("%s: got %d %s\nwant %d %s", tc.p.Msg, w.Code, w.Body, tc.status, tc.body)
		}
		if ct := w.Header().Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: Content-Type %q", tc.p.Msg, ct)
		}
		if ra := w.Header().Get("Retry-After"); (ra == "1") != (tc.status == 503) {
			t.Errorf("%s: Retry-After %q", tc.p.Msg, ra)
		}
		if tc.p.Error() != tc.p.Msg {
			t.Errorf("Error() = %q", tc.p.Error())
		}
	}
}

// TestIngressOverLoopback runs the decision the server will make, on a real listener, through
// a trusted proxy hop (the test client on 127.0.0.1 plays the proxy).
func TestIngressOverLoopback(t *testing.T) {
	trusted, err := ParseTrusted([]string{"127.0.0.0/8"})
	if err != nil {
		t.Fatal(err)
	}
	router := NewRouter(NewTable(Config{WildcardDomain: ".models.example.com"}, []Circuit{
		{ID: fixtureCircuitID, Subdomain: "llama-abc123", Pool: "circuit:" + fixtureCircuitID, AllowList: ParseAllowList(ptr("198.51.100.0/24"))},
	}))
	v := Verifier{Secret: []byte(fixtureSecret)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res := router.Resolve(Host(r, trusted))
		if p := res.Problem(); p != nil {
			p.ServeHTTP(w, r)
			return
		}
		if res.Kind != HostCircuit {
			_, _ = io.WriteString(w, res.Kind.String())
			return
		}
		ip, _ := ClientIP(r, trusted)
		if p := v.Check(r, res.Circuit, ip); p != nil {
			p.ServeHTTP(w, r)
			return
		}
		_, _ = io.WriteString(w, res.Circuit.Pool)
	}))
	defer srv.Close()

	cases := []struct {
		name, host, xff, auth string
		status                int
		body                  string // plain body, or the problem's msg
	}{
		{"own surface", "127.0.0.1", "", "", 200, "own"},
		{"apex aggregates", "models.example.com", "", "", 200, "aggregation"},
		{"unknown subdomain", "Nope.models.example.com:443", "", "", 400, "E20009: Subdomain nope not registered"},
		{"client outside allow-list", "llama-abc123.models.example.com", "192.0.2.1", "Bearer " + fixtureToken(t), 403, "E20011: Client address not allowed"},
		{"no XFF: the proxy itself is the client", "llama-abc123.models.example.com", "", "Bearer " + fixtureToken(t), 403, "E20011: Client address not allowed"},
		{"allowed client, no token", "llama-abc123.models.example.com", "198.51.100.7", "", 401, "E20006: Authorization header not provided"},
		{"allowed client, valid token", "LLAMA-abc123.models.example.com.", "203.0.113.1, 198.51.100.7", "Bearer " + fixtureToken(t), 200, "circuit:" + fixtureCircuitID},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Host = tc.host
			if tc.xff != "" {
				req.Header.Set("X-Forwarded-For", tc.xff)
			}
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			got := string(raw)
			if resp.StatusCode != 200 {
				var body struct {
					Msg   string `json:"msg"`
					Error struct {
						Message string `json:"message"`
					} `json:"error"`
				}
				if err := json.Unmarshal(raw, &body); err != nil {
					t.Fatalf("problem body %q: %v", raw, err)
				}
				if body.Error.Message != body.Msg {
					t.Fatalf("error.message %q differs from msg %q", body.Error.Message, body.Msg)
				}
				got = body.Msg
			}
			if resp.StatusCode != tc.status || got != tc.body {
				t.Fatalf("got %d %q, want %d %q", resp.StatusCode, got, tc.status, tc.body)
			}
		})
	}
}
