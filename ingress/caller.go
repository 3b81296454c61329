package ingress

import (
	"net/http"
	"net/netip"
)

// Caller is one request on an aggregation host, where a model may be served by many circuits
// and each decides for itself. Its token is verified once; a token that fails verification
// counts as no token, so public circuits stay reachable.
type Caller struct {
	ip        netip.Addr
	preflight bool     // OPTIONS: credentials are not asked for
	id        string   // "id" claim of a verified token; "" without one
	failure   *Problem // why verification failed; nil when the token verified
}

// Caller verifies the request's credentials once, for Reaches and Filter to use per circuit.
func (v Verifier) Caller(r *http.Request, ip netip.Addr) Caller {
	c := Caller{ip: ip}
	if r.Method == http.MethodOptions {
		c.preflight = true
		return c
	}
	c.id, c.failure = v.credentials(r)
	return c
}

// Reaches reports whether the caller may use circuit c: c's allow-list admits it, and c is
// public or the caller's token names c.
func (c Caller) Reaches(circ *Circuit) bool {
	return circ.AllowList.Allows(c.ip) && c.admitted(circ)
}

func (c Caller) admitted(circ *Circuit) bool {
	return circ.OpenToPublic || c.preflight || (c.id != "" && c.id == circ.ID)
}

// Filter keeps the circuits (serving one model) that the caller may use, in order. If there
// were some but none is left, it says why: 403 E20011 when the allow-lists are what stopped the
// caller (its credentials would open one of them, or every allow-list turned it away, which is
// what each circuit's own host would answer), otherwise 401 with the caller's credential failure.
func (c Caller) Filter(circuits []*Circuit) ([]*Circuit, *Problem) {
	var kept []*Circuit
	ipStoppedAdmitted, anyIPAllowed := false, false
	for _, circ := range circuits {
		ipOK, credOK := circ.AllowList.Allows(c.ip), c.admitted(circ)
		switch {
		case ipOK && credOK:
			kept = append(kept, circ)
		case credOK:
			ipStoppedAdmitted = true
		}
		anyIPAllowed = anyIPAllowed || ipOK
	}
	if len(kept) > 0 || len(circuits) == 0 {
		return kept, nil
	}
	if ipStoppedAdmitted || !anyIPAllowed {
		return nil, ClientIPNotAllowed()
	}
	return nil, c.credentialFailure()
}

// credentialFailure is the 401 for a circuit the caller's credentials do not open.
func (c Caller) credentialFailure() *Problem {
	if c.failure != nil {
		return c.failure
	}
	return tokenMismatch()
}
