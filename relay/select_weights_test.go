package relay

import (
	"strings"
	"testing"
)

// weights: among the least loaded, round robin in seq order after the cursor while their
// weights agree and nothing ramps; smooth weighted round robin otherwise. Each case picks
// several times in a row, the cursor following the pick as assignLocked moves it.
func TestWeights(t *testing.T) {
	up := func(id string, weight, withheld float64) *member {
		m := upstreamMember(id, weight)
		m.withheld = withheld
		return m
	}
	cases := []struct {
		name    string
		served  []*member
		cursor  uint64
		ramping bool
		want    string // the picks in order
	}{
		{"round robin from the start", []*member{worker("a", 9, 0, "m"), worker("b", 9, 0, "m"), worker("c", 9, 0, "m")}, 0, false,
			"a b c a"},
		{"round robin after the cursor", []*member{worker("a", 9, 0, "m"), worker("b", 9, 0, "m"), worker("c", 9, 0, "m")}, 2, false,
			"c a b c"},
		{"only the least loaded take part", []*member{worker("a", 9, 0, "m"), worker("b", 9, 1, "m"), worker("c", 9, 0, "m")}, 0, false,
			"a c a c"},
		{"weights 1:3", []*member{up("a", 1, 0), up("b", 3, 0)}, 0, false, "b a b b b a b b"},
		{"equal weights while a target ramps: by the weights now", []*member{up("a", 1, 0.5), up("b", 1, 0)}, 0, true,
			"b a b b a b"},
		// Round robin after the cursor would start at b.
		{"equal weights, ramping elsewhere in the pool", []*member{up("a", 1, 0), up("b", 1, 0)}, 1, true, "a b a b"},
		{"equal weights, nothing ramping", []*member{up("a", 1, 0), up("b", 1, 0)}, 1, false, "b a b a"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			served := numbered(c.served...)
			cursor := c.cursor
			var got []string
			for range strings.Fields(c.want) {
				cs := gathered(served, nil)
				cs.cursor, cs.ramping = cursor, c.ramping
				m := weights{}.pick(cs)
				got = append(got, idOf(m))
				cursor = m.seq
			}
			if strings.Join(got, " ") != c.want {
				t.Fatalf("picked %q, want %q", strings.Join(got, " "), c.want)
			}
		})
	}
}

// weights picks nothing from nothing.
func TestWeightsWithoutCandidates(t *testing.T) {
	if m := (weights{}).pick(gathered(nil, nil)); m != nil {
		t.Fatalf("picked %s from nothing", m.id)
	}
}
