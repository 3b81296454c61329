package relay

import "testing"

func TestNamesClient(t *testing.T) {
	for name, want := range map[string]bool{
		"X-Forwarded-For": true, "x-forwarded-proto": true, "X-FORWARDED-HOST": true, "Forwarded": true,
		"X-Real-Ip": true, "X-Client-Ip": true, "TRUE-CLIENT-IP": true, "X-Original-Forwarded-For": true,
		"Content-Type": false, "X-Forwarded-": false, "Forwardedx": false, "Trailer": false, "X": false, "": false,
	} {
		if got := namesClient(name); got != want {
			t.Errorf("namesClient(%q) = %v, want %v", name, got, want)
		}
	}
}
