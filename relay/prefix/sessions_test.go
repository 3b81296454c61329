package prefix

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestSessionsTTL(t *testing.T) {
	s := NewSessions(5*time.Minute, 100)
	t0 := time.Now()
	s.Set("a", 7, t0)
	for _, tc := range []struct {
		at     time.Duration
		target uint64
		ok     bool
	}{
		{0, 7, true},
		{5 * time.Minute, 7, true},
		{5*time.Minute + time.Nanosecond, 0, false},
	} {
		target, ok := s.Get("a", t0.Add(tc.at))
		if target != tc.target || ok != tc.ok {
			t.Errorf("at +%v: %d %v, want %d %v", tc.at, target, ok, tc.target, tc.ok)
		}
	}
	if s.Len() != 0 {
		t.Fatalf("an expired session is still held: %d", s.Len())
	}
	// Set refreshes, and moves the session.
	s.Set("b", 1, t0)
	s.Set("b", 2, t0.Add(4*time.Minute))
	if target, ok := s.Get("b", t0.Add(8*time.Minute)); !ok || target != 2 {
		t.Fatalf("refreshed session: %d %v", target, ok)
	}
	if _, ok := s.Get("unknown", t0); ok {
		t.Fatal("an unknown key found")
	}
}

func TestSessionsBound(t *testing.T) {
	s := NewSessions(time.Hour, 3)
	now := time.Now()
	for i, k := range []string{"a", "b", "c"} {
		s.Set(k, uint64(i), now)
	}
	s.Set("a", 10, now) // a is now the most recent
	s.Set("d", 3, now)  // b, the oldest, goes
	for k, want := range map[string]bool{"a": true, "b": false, "c": true, "d": true} {
		if _, ok := s.Get(k, now); ok != want {
			t.Errorf("%s held: %v, want %v", k, ok, want)
		}
	}
	for i := range 1000 {
		s.Set(fmt.Sprint("k", i), uint64(i), now)
		if s.Len() > 3 {
			t.Fatalf("%d sessions held, bound 3", s.Len())
		}
	}
	// Expired sessions go first, before any live one.
	s = NewSessions(time.Minute, 10)
	for i := range 5 {
		s.Set(fmt.Sprint("old", i), 1, now)
	}
	s.Set("new", 2, now.Add(2*time.Minute))
	if s.Len() != 1 {
		t.Fatalf("%d sessions held after the others expired, want 1", s.Len())
	}
}

func TestSessionsForgetAndEmptyKey(t *testing.T) {
	s := NewSessions(time.Hour, 10)
	now := time.Now()
	s.Set("a", 1, now)
	s.Set("b", 2, now)
	s.Set("c", 1, now)
	s.Forget(1)
	for k, want := range map[string]bool{"a": false, "b": true, "c": false} {
		if _, ok := s.Get(k, now); ok != want {
			t.Errorf("%s held: %v, want %v", k, ok, want)
		}
	}
	s.Set("", 5, now)
	if _, ok := s.Get("", now); ok || s.Len() != 1 {
		t.Fatal("the empty key is a session")
	}
}

func TestSessionsConcurrent(t *testing.T) {
	s := NewSessions(time.Second, 50)
	now := time.Now()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 3000 {
				k := fmt.Sprint(i % 100)
				at := now.Add(time.Duration(i) * time.Millisecond)
				s.Set(k, uint64(g), at)
				s.Get(k, at)
				if i%700 == 0 {
					s.Forget(uint64(g))
				}
			}
		})
	}
	wg.Wait()
	if s.Len() > 50 {
		t.Fatalf("%d sessions held, bound 50", s.Len())
	}
}
