package relay

import (
	"fmt"
	"testing"
)

// affinity: the session's last target while it is eligible and its load is within the slack
// of the lowest; otherwise none (and least load moves the session).
func TestAffinity(t *testing.T) {
	cases := []struct {
		name    string
		loads   []int // of workers w1, w2, w3
		slots   int   // each worker's max_concurrent
		session int   // index of the session's target; -1 = no session
		slack   int
		want    string
	}{
		{"no session", []int{0, 0, 0}, 8, -1, 2, ""},
		{"the session's target, though busier", []int{0, 2, 0}, 8, 1, 2, "w2"},
		{"at the bound exactly", []int{1, 3, 2}, 8, 1, 2, "w2"},
		{"past the bound", []int{0, 3, 0}, 8, 1, 2, ""},
		{"slack 0: only at the lowest load", []int{1, 1, 2}, 8, 1, 0, "w2"},
		{"slack 0, one above the lowest", []int{0, 1, 0}, 8, 1, 0, ""},
		{"the bound counts from the lowest eligible", []int{4, 5, 4}, 8, 1, 1, "w2"},
		{"without room", []int{0, 4, 0}, 4, 1, 8, ""},
		{"a target that is gone", []int{0, 0, 0}, 8, 7, 2, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var served []*member
			for i, l := range c.loads {
				served = append(served, worker(fmt.Sprint("w", i+1), c.slots, l, "m"))
			}
			cs := gathered(numbered(served...), nil)
			if c.session >= 0 {
				cs.wish = wish{session: uint64(c.session + 1), hasSession: true}
			}
			if got := idOf(affinity{bound: loadBound{slack: c.slack}}.pick(cs)); got != c.want {
				t.Fatalf("picked %q, want %q", got, c.want)
			}
		})
	}
}
