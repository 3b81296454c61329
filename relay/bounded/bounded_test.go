package bounded

import (
	"fmt"
	"testing"
	"time"
)

var t0 = time.Unix(1000, 0)

func TestExpiry(t *testing.T) {
	m := New[string, int](100)
	m.Put("a", 1, 10, t0.Add(time.Minute))
	if v, ok := m.Get("a", t0); !ok || v != 1 {
		t.Fatalf("Get before expiry: %v %v", v, ok)
	}
	if _, ok := m.Get("a", t0.Add(time.Minute)); ok {
		t.Error("an entry outlived its expiry")
	}
	if m.Len() != 0 || m.Bytes() != 0 {
		t.Errorf("an expired entry still counts: %d entries, %d bytes", m.Len(), m.Bytes())
	}
}

// The bound holds: the oldest put go first; replacing an entry makes it the newest; a value
// larger than the bound is not kept and pushes nothing out.
func TestBoundOldestFirst(t *testing.T) {
	m := New[string, int](30)
	for i := range 5 {
		m.Put(fmt.Sprint(i), i, 10, t0.Add(time.Hour))
		if m.Bytes() > 30 {
			t.Fatalf("after %d entries: %d bytes, bound 30", i+1, m.Bytes())
		}
	}
	for i, want := range []bool{false, false, true, true, true} {
		if _, ok := m.Get(fmt.Sprint(i), t0); ok != want {
			t.Errorf("entry %d kept %v, want %v", i, ok, want)
		}
	}
	m.Put("2", 20, 10, t0.Add(time.Hour)) // 2 is now the newest: 3 goes next
	m.Put("5", 5, 10, t0.Add(time.Hour))
	if _, ok := m.Get("3", t0); ok {
		t.Error("replacing the oldest did not make it the newest")
	}
	if v, _ := m.Get("2", t0); v != 20 {
		t.Errorf("replaced entry holds %d", v)
	}
	m.Put("huge", 0, 31, t0.Add(time.Hour))
	if _, ok := m.Get("huge", t0); ok || m.Len() != 3 {
		t.Errorf("a value larger than the bound: kept %v, %d entries left", ok, m.Len())
	}
}

func TestDeleteAndClear(t *testing.T) {
	m := New[string, int](100)
	m.Put("a", 1, 10, t0.Add(time.Hour))
	m.Put("b", 2, 10, t0.Add(time.Hour))
	if !m.Delete("a") || m.Delete("a") {
		t.Error("Delete reports wrongly whether the key was there")
	}
	if m.Bytes() != 10 {
		t.Errorf("%d bytes after a Delete, want 10", m.Bytes())
	}
	m.Clear()
	if _, ok := m.Get("b", t0); ok || m.Len() != 0 || m.Bytes() != 0 {
		t.Error("Clear left something")
	}
}
