package relay

import (
	"testing"
	"time"
)

// serving: the members naming a model serve it while any of them can still take work (busy
// counts); the catch-alls serve it only when none can, or none names it.
func TestServingExactNameBeforeCatchAll(t *testing.T) {
	named := func(id string, change func(*member)) *member {
		m := upstreamMember(id, 1)
		m.setModels([]string{"m"})
		if change != nil {
			change(m)
		}
		return m
	}
	draining := func(m *member) { m.draining = true }
	gone := func(m *member) { m.setOut(outGone, true) }
	open := func(m *member) { m.brk = breaker{state: breakerOpen, until: time.Now().Add(time.Hour)} }
	cooled := func(m *member) { m.brk = breaker{state: breakerOpen, until: time.Now().Add(-time.Second)} }
	full := func(m *member) { m.maxConcurrent, m.inFlight = 1, 1 }
	suspect := func(m *member) { m.setOut(outSuspect, true) }
	cases := []struct {
		name  string
		named []*member
		stars bool // a catch-all exists
		want  string
	}{
		{"nobody names it: the catch-all", nil, true, "star"},
		{"nobody at all", nil, false, ""},
		{"an idle named target", []*member{named("a", nil)}, true, "a"},
		{"a busy named target keeps its model", []*member{named("a", full)}, true, "a"},
		{"a suspect named target keeps its model", []*member{named("a", suspect)}, true, "a"},
		{"a draining named target gives way", []*member{named("a", draining)}, true, "star"},
		{"a gone named target gives way", []*member{named("a", gone)}, true, "star"},
		{"a breaker-open named target gives way", []*member{named("a", open)}, true, "star"},
		{"a cool-down that ended holds the model again", []*member{named("a", cooled)}, true, "a"},
		{"one live among dead holds it for all", []*member{named("a", draining), named("b", full)}, true, "a,b"},
		{"without a catch-all, the named even when all are down", []*member{named("a", draining)}, false, "a"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var stars []*member
			if c.stars {
				stars = []*member{upstreamMember("star", 1)}
			}
			if got := ids(serving(c.named, stars, &clock{})); got != c.want {
				t.Fatalf("served by %q, want %q", got, c.want)
			}
		})
	}
}
