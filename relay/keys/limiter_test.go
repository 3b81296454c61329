package keys

import (
	"testing"
	"time"
)

func TestLimiterRPM(t *testing.T) {
	var l Limiter
	lim := Limits{RateLimitRPM: 3}
	now := time.Unix(1e9, 0)
	for i := range 3 {
		if _, ok := l.Admit(lim, now); !ok {
			t.Fatalf("request %d refused", i)
		}
	}
	r, ok := l.Admit(lim, now)
	if ok || r.Limit != "rate_limit_rpm" || r.Wait != 20*time.Second {
		t.Fatalf("4th request: %+v %v, want refused by rpm for 20s", r, ok)
	}
	// One request's worth refills in a third of the minute.
	if _, ok := l.Admit(lim, now.Add(20*time.Second)); !ok {
		t.Fatal("refused after the refill")
	}
	if _, ok := l.Admit(lim, now.Add(20*time.Second)); ok {
		t.Fatal("admitted past the limit")
	}
}

func TestLimiterTPM(t *testing.T) {
	var l Limiter
	lim := Limits{TokenLimitTPM: 600} // 10 tokens a second
	now := time.Unix(1e9, 0)
	if _, ok := l.Admit(lim, now); !ok {
		t.Fatal("first request refused")
	}
	// It used more than the whole minute's budget: the key waits until it is paid back.
	l.Charge(lim, 700, now)
	r, ok := l.Admit(lim, now)
	if ok || r.Limit != "token_limit_tpm" {
		t.Fatalf("over the budget: %+v %v", r, ok)
	}
	if want := 10100 * time.Millisecond; r.Wait != want {
		t.Fatalf("wait %v, want %v", r.Wait, want)
	}
	if _, ok := l.Admit(lim, now.Add(r.Wait)); !ok {
		t.Fatal("refused once paid back")
	}
}

func TestLimiterUnlimitedAndChangedLimits(t *testing.T) {
	var l Limiter
	now := time.Unix(1e9, 0)
	for range 1000 {
		if _, ok := l.Admit(Limits{}, now); !ok {
			t.Fatal("no limits refused a request")
		}
	}
	lim := Limits{RateLimitRPM: 100}
	l.Admit(lim, now)
	// Lowered to 1: the bucket holds at most 1 from now on.
	lim.RateLimitRPM = 1
	if _, ok := l.Admit(lim, now); !ok {
		t.Fatal("first under the lowered limit refused")
	}
	if _, ok := l.Admit(lim, now); ok {
		t.Fatal("second under the lowered limit admitted")
	}
}
