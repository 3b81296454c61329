package relay

import (
	"testing"

	"modelrelay/relay/keys"
)

func TestKeyClasses(t *testing.T) {
	for _, tc := range []struct {
		priority, max string
		def, ceiling  priority
	}{
		{"", "", priorityNormal, priorityNormal},
		{"low", "", priorityLow, priorityLow},
		{"high", "", priorityHigh, priorityHigh},
		{"low", "normal", priorityLow, priorityNormal},
		{"", "high", priorityNormal, priorityHigh},
		{"high", "low", priorityHigh, priorityLow}, // inconsistent: the ceiling still caps the default
		{"urgent", "soon", priorityNormal, priorityNormal},
	} {
		def, ceiling := keyClasses(keys.Limits{Priority: tc.priority, MaxPriority: tc.max})
		if def != tc.def || ceiling != tc.ceiling {
			t.Errorf("priority %q, max_priority %q: default %s, ceiling %s; want %s, %s", tc.priority, tc.max,
				priorityNames[def], priorityNames[ceiling], priorityNames[tc.def], priorityNames[tc.ceiling])
		}
	}
}

func TestAdmitClass(t *testing.T) {
	for _, tc := range []struct {
		asked         string
		def, ceiling  priority
		want          priority
		capped, valid bool
	}{
		{"", priorityNormal, priorityHigh, priorityNormal, false, true},
		{"high", priorityNormal, priorityHigh, priorityHigh, false, true},
		{"high", priorityNormal, priorityNormal, priorityNormal, true, true}, // capped, still served
		{"high", priorityLow, priorityNormal, priorityNormal, true, true},
		{"normal", priorityLow, priorityNormal, priorityNormal, false, true}, // above its default, within its ceiling
		{"low", priorityHigh, priorityHigh, priorityLow, false, true},        // lowering is always allowed
		{"low", priorityNormal, priorityLow, priorityLow, false, true},
		{"", priorityLow, priorityLow, priorityLow, false, true},
		{"", priorityHigh, priorityNormal, priorityNormal, true, true},
		{"High", priorityNormal, priorityHigh, priorityNormal, false, false},
		{"urgent", priorityNormal, priorityLow, priorityNormal, false, false},
	} {
		got, capped, ok := admitClass(tc.asked, tc.def, tc.ceiling)
		if ok != tc.valid || (ok && (got != tc.want || capped != tc.capped)) {
			t.Errorf("asked %q, default %s, ceiling %s: %s capped=%v ok=%v; want %s capped=%v ok=%v", tc.asked,
				priorityNames[tc.def], priorityNames[tc.ceiling], priorityNames[got], capped, ok,
				priorityNames[tc.want], tc.capped, tc.valid)
		}
	}
}

func TestMaxClientPriorityOption(t *testing.T) {
	for name, want := range map[string]priority{"": priorityHigh, "high": priorityHigh, "normal": priorityNormal, "low": priorityLow} {
		s, err := New(Options{Scheduling: Scheduling{MaxClientPriority: name}})
		if err != nil {
			t.Fatalf("MaxClientPriority %q: %v", name, err)
		}
		if s.clientCeiling != want {
			t.Errorf("MaxClientPriority %q: ceiling %s, want %s", name, priorityNames[s.clientCeiling], priorityNames[want])
		}
		s.Close()
	}
	if _, err := New(Options{Scheduling: Scheduling{MaxClientPriority: "urgent"}}); err == nil {
		t.Error("MaxClientPriority urgent: no error")
	}
}
