package usage

import (
	"bytes"
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestSplitInvariance: for every sample and mode, feeding it cut at any one point, byte by
// byte, or in random pieces gives the counts and the output of feeding it whole.
func TestSplitInvariance(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var tap Tap
	for _, s := range samples {
		body := []byte(s.body)
		for m := range s.modes() {
			wantOut, want := run(m, body)
			check := func(how string, pieces ...[]byte) {
				t.Helper()
				out, c := runTap(&tap, m, pieces...)
				if c != want || !bytes.Equal(out, wantOut) {
					t.Fatalf("%s (mode %d) %s: %+v %q, whole: %+v %q", s.name, m, how, c, out, want, wantOut)
				}
			}
			for i := 0; i <= len(body); i++ {
				check("cut at "+strconv.Itoa(i), body[:i], body[i:])
			}
			check("byte by byte", pieces(body, 1)...)
			for range 50 {
				var ps [][]byte
				for b := body; len(b) > 0; {
					n := min(1+rng.IntN(40), len(b))
					ps, b = append(ps, b[:n]), b[n:]
				}
				check("in random pieces", ps...)
			}
		}
	}
}
