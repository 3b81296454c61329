package relay

import "testing"

// preferred: the eligible target named by id or name; none when it has no room or is not
// among the candidates (the next rule decides).
func TestPreferred(t *testing.T) {
	named := func(m *member, name string) *member { m.name = name; return m }
	cases := []struct {
		name   string
		served []*member
		avoid  string
		prefer string
		want   string
	}{
		{"nothing preferred", []*member{worker("a", 4, 0, "m")}, "", "", ""},
		{"by id, over a less loaded one", []*member{worker("a", 4, 0, "m"), worker("b", 4, 3, "m")}, "", "b", "b"},
		{"by name", []*member{worker("a", 4, 0, "m"), named(worker("id-b", 4, 0, "m"), "gpu-b")}, "", "gpu-b", "id-b"},
		{"without room", []*member{worker("a", 4, 0, "m"), worker("b", 1, 1, "m")}, "", "b", ""},
		{"avoided by a retry", []*member{worker("a", 4, 0, "m"), worker("b", 4, 0, "m")}, "b", "b", ""},
		{"not a candidate", []*member{worker("a", 4, 0, "m")}, "", "zz", ""},
		{"the first eligible of those answering to the name", []*member{
			named(worker("x", 1, 1, "m"), "gpu"), named(worker("y", 4, 0, "m"), "gpu"), named(worker("z", 4, 0, "m"), "gpu"),
		}, "", "gpu", "y"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			served := numbered(c.served...)
			var avoid *member
			for _, m := range served {
				if m.id == c.avoid {
					avoid = m
				}
			}
			cs := gathered(served, avoid)
			cs.wish = wish{prefer: c.prefer}
			if got := idOf(preferred{}.pick(cs)); got != c.want {
				t.Fatalf("picked %q, want %q", got, c.want)
			}
		})
	}
}
