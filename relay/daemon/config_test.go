package daemon

import (
	"strings"
	"testing"
	"time"
)

func TestConnectURL(t *testing.T) {
	tests := []struct {
		base, provider, want string
		wantErr              bool
	}{
		{"http://proxy.local:8080", "local", "ws://proxy.local:8080/v1/worker/connect?provider=local", false},
		{"https://proxy.example.com", "p", "wss://proxy.example.com/v1/worker/connect?provider=p", false},
		{"http://proxy.local:8080/", "p", "ws://proxy.local:8080/v1/worker/connect?provider=p", false},
		{"https://proxy.local///", "p", "wss://proxy.local/v1/worker/connect?provider=p", false},
		{"HTTPS://Proxy.local/base/", "p", "wss://Proxy.local/base/v1/worker/connect?provider=p", false},
		{"ws://already-ws.local", "p", "ws://already-ws.local/v1/worker/connect?provider=p", false},
		{"wss://already.local", "p", "wss://already.local/v1/worker/connect?provider=p", false},
		{"http://h", "team a/b&c=d", "ws://h/v1/worker/connect?provider=team+a%2Fb%26c%3Dd", false},
		{"http://h", "", "ws://h/v1/worker/connect?provider=local", false},
		{"ftp://h", "p", "", true},
		{"proxy.local:8080", "p", "", true},
		{"http://", "p", "", true},
		{"http://h/?x=1", "p", "", true},
		{"", "p", "", true},
	}
	for _, tt := range tests {
		got, err := ConnectURL(tt.base, tt.provider)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ConnectURL(%q, %q) = %q, %v; want %q, error %v", tt.base, tt.provider, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestConfigValidation(t *testing.T) {
	ok := Config{ProxyURL: "http://h", WorkerSecret: "s", BackendURL: "http://b"}
	if _, err := New(ok); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	for name, mutate := range map[string]func(*Config){
		"no secret":        func(c *Config) { c.WorkerSecret = "" },
		"bad proxy":        func(c *Config) { c.ProxyURL = "tcp://h" },
		"bad second proxy": func(c *Config) { c.ProxyURL = "http://h,tcp://g" },
		"same relay twice": func(c *Config) { c.ProxyURL = "http://h, http://h/" },
		"only commas":      func(c *Config) { c.ProxyURL = " , " },
		"relative backend": func(c *Config) { c.BackendURL = "/v1" },
		"ws backend":       func(c *Config) { c.BackendURL = "ws://b" },
	} {
		c := ok
		mutate(&c)
		if _, err := New(c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	several := ok
	several.ProxyURL = "http://a, https://b/relay/,"
	d, err := New(several)
	if err != nil {
		t.Fatalf("a list of relays: %v", err)
	}
	if want := "ws://a/v1/worker/connect?provider=local wss://b/relay/v1/worker/connect?provider=local"; strings.Join(d.relays, " ") != want {
		t.Errorf("relays = %q; want %q", d.relays, want)
	}
	d, _ = New(ok)
	if d.cfg.MaxConcurrency != 1 || d.cfg.Provider != "local" || d.cfg.WorkerName != "worker" {
		t.Errorf("defaults not applied: %+v", d.cfg)
	}
}

func TestBackoff(t *testing.T) {
	b := newBackoff(Config{}.withDefaults())
	b.rand = func(int64) int64 { return 0 }
	short := time.Second
	var got []time.Duration
	for range 7 {
		got = append(got, b.next(sessionEnd{}, short))
	}
	want := []time.Duration{1, 2, 4, 8, 16, 30, 30}
	for i := range want {
		if got[i] != want[i]*time.Second {
			t.Fatalf("delays %v, want %v seconds", got, want)
		}
	}
	if d := b.next(sessionEnd{}, 91*time.Second); d != time.Second {
		t.Errorf("after a long session: %v", d)
	}
	b.next(sessionEnd{}, short)
	if d := b.next(sessionEnd{graceful: true}, short); d != 2*time.Second {
		t.Errorf("after a graceful close: %v", d)
	}
	if d := b.next(sessionEnd{}, short); d != time.Second {
		t.Errorf("graceful close did not reset the backoff: %v", d)
	}
	b.rand = func(n int64) int64 { return n - 1 }
	if d := b.next(sessionEnd{}, short); d < 2*time.Second || d >= 2*time.Second+500*time.Millisecond {
		t.Errorf("jitter out of range: %v", d)
	}
}
