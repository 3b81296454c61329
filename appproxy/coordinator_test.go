package appproxy_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"testing"

	"modelrelay/appproxy"
	"modelrelay/appproxy/appproxytest"
	"modelrelay/protocol"
)

func registration() protocol.WorkerRegistration {
	return protocol.NewInferenceRegistration(testAuthority, "router.example.com", 10201, false, true, ".models.example.com", 443)
}

func TestCoordinatorClientAgainstDouble(t *testing.T) {
	double := appproxytest.NewCoordinator(testSecret, "")
	srv := httptest.NewServer(double)
	defer srv.Close()
	c, err := appproxy.NewCoordinator(srv.URL+"/", testSecret, nil) // trailing slash is trimmed
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	w, err := c.Register(ctx, registration())
	if err != nil {
		t.Fatal(err)
	}
	if w.ID == "" || w.Authority != testAuthority || w.AvailableSlots != -1 || w.Nodes != 1 {
		t.Fatalf("worker %+v", w)
	}
	again, err := c.Register(ctx, registration())
	if err != nil || again.ID != w.ID || again.Nodes != 2 {
		t.Fatalf("re-registration is idempotent by authority: %+v %v", again, err)
	}
	fixture, err := os.ReadFile("../testdata/appproxy/circuits.json")
	if err != nil {
		t.Fatal(err)
	}
	want, err := protocol.DecodeCircuitList(fixture)
	if err != nil {
		t.Fatal(err)
	}
	var list struct{ Circuits []json.RawMessage }
	if err := json.Unmarshal(fixture, &list); err != nil {
		t.Fatal(err)
	}
	if _, err := double.AddCircuit(testAuthority, list.Circuits[0]); err != nil {
		t.Fatal(err)
	}
	got, err := c.Circuits(ctx, w.ID)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("pull: %v\n%+v\n%+v", err, got, want)
	}
	if _, err := c.Heartbeat(ctx, w.ID); err != nil {
		t.Fatal(err)
	}
	if err := c.Deregister(ctx, w.ID); err != nil {
		t.Fatal(err)
	}
	double.Forget()
	for name, call := range map[string]func() error{
		"heartbeat":  func() error { _, err := c.Heartbeat(ctx, w.ID); return err },
		"pull":       func() error { _, err := c.Circuits(ctx, w.ID); return err },
		"deregister": func() error { return c.Deregister(ctx, w.ID) },
	} {
		err := call()
		if !errors.Is(err, appproxy.ErrNotFound) || errors.Is(err, appproxy.ErrConfig) || appproxy.Retryable(err) {
			t.Errorf("%s of a forgotten worker: %v", name, err)
		}
	}
}

func TestCoordinatorErrorKinds(t *testing.T) {
	tests := []struct {
		status         int
		body           string
		config, notFnd bool
		retry          bool
		line           string
	}{
		{401, `{"type":"https://api.backend.ai/probs/invalid-credentials","title":"Unauthorized access","error_code":"E00003","msg":"bad token"}`,
			true, false, false, "coordinator register: HTTP 401: Unauthorized access: bad token (error_code E00003)"},
		{400, `{"type":"https://api.backend.ai/probs/invalid-api-params","title":"Invalid API parameters","msg":{"authority":"required"}}`,
			true, false, false, `coordinator register: HTTP 400: Invalid API parameters: {"authority":"required"}`},
		{403, `{"title":"Forbidden"}`, true, false, false, "coordinator register: HTTP 403: Forbidden"},
		{404, `{"type":"https://api.backend.ai/probs/object-not-found","title":"Object not found"}`,
			false, true, false, "coordinator register: HTTP 404: Object not found"},
		{500, `{"type":"https://api.backend.ai/probs/internal-server-error","title":"Internal server error"}`,
			false, false, true, "coordinator register: HTTP 500: Internal server error"},
		{502, "<html>\n<body>Bad gateway</body>\n</html>", false, false, true,
			"coordinator register: HTTP 502: Bad Gateway: <html> <body>Bad gateway</body> </html>"},
		{429, ``, false, false, true, "coordinator register: HTTP 429: Too Many Requests"},
		{401, `{"title":"Unauthorized","msg":"token ` + testSecret + ` rejected"}`, true, false, false,
			"coordinator register: HTTP 401: Unauthorized: token [redacted] rejected"},
	}
	for _, tt := range tests {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(tt.status)
			_, _ = io.WriteString(w, tt.body)
		}))
		c, _ := appproxy.NewCoordinator(srv.URL, testSecret, nil)
		_, err := c.Register(context.Background(), registration())
		srv.Close()
		if err == nil {
			t.Fatalf("%d: no error", tt.status)
		}
		if errors.Is(err, appproxy.ErrConfig) != tt.config || errors.Is(err, appproxy.ErrNotFound) != tt.notFnd || appproxy.Retryable(err) != tt.retry {
			t.Errorf("%d: kinds config=%v notfound=%v retry=%v", tt.status, errors.Is(err, appproxy.ErrConfig),
				errors.Is(err, appproxy.ErrNotFound), appproxy.Retryable(err))
		}
		if err.Error() != tt.line {
			t.Errorf("%d: line\n got %q\nwant %q", tt.status, err.Error(), tt.line)
		}
		var ce *appproxy.CoordinatorError
		if !errors.As(err, &ce) || ce.Status != tt.status {
			t.Errorf("%d: not a CoordinatorError: %T", tt.status, err)
		}
	}
}

func TestCoordinatorConnectionErrorsAreRetryable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	c, _ := appproxy.NewCoordinator("http://"+addr, testSecret, nil)
	_, err = c.Register(context.Background(), registration())
	if err == nil || !appproxy.Retryable(err) || errors.Is(err, appproxy.ErrConfig) {
		t.Fatalf("connection refused: %v", err)
	}
	if strings.Contains(err.Error(), testSecret) {
		t.Fatal("secret in error")
	}
	// A 2xx the coordinator did not mean (a proxy's HTML page) is retryable too.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "<html>welcome</html>")
	}))
	defer srv.Close()
	c, _ = appproxy.NewCoordinator(srv.URL, testSecret, nil)
	if _, err := c.Register(context.Background(), registration()); err == nil || !appproxy.Retryable(err) {
		t.Fatalf("html 200: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Register(ctx, registration()); appproxy.Retryable(err) {
		t.Fatalf("cancelled call is retryable: %v", err)
	}
}

func TestNewCoordinatorRejectsBadURL(t *testing.T) {
	for _, u := range []string{"", "coordinator:10200", "ftp://x", "http://", "://x"} {
		if _, err := appproxy.NewCoordinator(u, "s", nil); err == nil {
			t.Errorf("%q accepted", u)
		}
	}
}
