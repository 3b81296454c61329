package protocol

import "testing"

func TestEndToEnd(t *testing.T) {
	listed := ConnectionListed([]string{"X-Custom, keep-alive", " ", "Foo"})
	cases := map[string]bool{
		"Content-Type": true, "authorization": true, "X-Api-Key": true, "anthropic-version": true,
		"Connection": false, "KEEP-ALIVE": false, "Te": false, "Trailer": false, "Transfer-Encoding": false,
		"Upgrade": false, "Host": false, "content-length": false, "Proxy-Authorization": false,
		"proxy-anything": false, "X-Custom": false, "foo": false, "Proxy": true,
	}
	for name, want := range cases {
		if got := EndToEnd(name, listed); got != want {
			t.Errorf("EndToEnd(%q) = %v, want %v", name, got, want)
		}
	}
	if ConnectionListed(nil) != nil || EndToEnd("X-Custom", nil) != true {
		t.Error("no Connection header lists nothing")
	}
}
