package ingress

import (
	"net/http"
	"net/netip"
)

// Check applies circuit c's rules to a request on its subdomain, in the contract's order:
// allow-list (403), then credentials (401). nil means the request may pass. Public circuits and
// CORS preflights (OPTIONS) need no credentials, so no token work is done for them; the
// allow-list applies to them all the same.
func (v Verifier) Check(r *http.Request, c *Circuit, ip netip.Addr) *Problem {
	if !c.AllowList.Allows(ip) {
		return ClientIPNotAllowed()
	}
	if c.OpenToPublic || r.Method == http.MethodOptions {
		return nil
	}
	caller := v.Caller(r, ip)
	if caller.admitted(c) {
		return nil
	}
	return caller.credentialFailure()
}
