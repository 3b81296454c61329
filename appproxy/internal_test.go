package appproxy

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"modelrelay/protocol"
)

func TestBackoff(t *testing.T) {
	b := newBackoff(time.Second, 30*time.Second)
	var got []time.Duration
	for range 7 {
		got = append(got, b.Next())
	}
	want := []time.Duration{1, 2, 4, 8, 16, 30, 30}
	for i := range want {
		if got[i] != want[i]*time.Second {
			t.Fatalf("delays %v", got)
		}
	}
	b.Reset()
	if b.Next() != time.Second {
		t.Fatal("reset did not start over")
	}
}

func TestRequestID(t *testing.T) {
	re := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for range 1000 {
		id := protocol.NewUUID()
		if !re.MatchString(id) || seen[id] {
			t.Fatalf("bad or repeated id %q", id)
		}
		seen[id] = true
	}
}

func TestOneLine(t *testing.T) {
	long := strings.Repeat("é", 300)
	got := oneLine("a\n b\t"+long, "")
	if strings.ContainsAny(got, "\n\t") || len(got) > 210 || !strings.HasSuffix(got, "…") {
		t.Fatalf("%q", got)
	}
	if oneLine("key=abc", "abc") != "key=[redacted]" {
		t.Fatal("secret kept")
	}
}

func FuzzCoordinatorError(f *testing.F) {
	f.Add(401, []byte(`{"type":"https://api.backend.ai/probs/invalid-credentials","title":"Unauthorized access","error_code":"E00003","msg":"bad"}`))
	f.Add(400, []byte(`{"title":"Invalid API parameters","msg":{"authority":["required"]},"error_code":7}`))
	f.Add(502, []byte("<html>\n<body>Bad gateway</body></html>"))
	f.Add(404, []byte(`{"msg":"the-secret"}`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		e := newCoordinatorError("register", status, body, "the-secret")
		line := e.Error()
		if strings.ContainsAny(line, "\r\n") || strings.Contains(line, "the-secret") {
			t.Fatalf("line %q", line)
		}
	})
}
