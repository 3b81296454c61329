package relay

import (
	"math"
	"testing"
)

func TestRequestID(t *testing.T) {
	for n, want := range map[uint64]string{1: "req-1", 42: "req-42", math.MaxUint64: "req-18446744073709551615"} {
		if got := requestID(n); got != want {
			t.Errorf("requestID(%d) = %q, want %q", n, got, want)
		}
	}
}
