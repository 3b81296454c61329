package ingress

import "strings"

// Config is the part of the AppProxy worker configuration that shapes host resolution.
type Config struct {
	WildcardDomain   string   // leading dot, for example ".models.example.com"; "" = none
	AggregationHosts []string // extra hosts that route by model name, like the bare apex
}

// HostKind says what a request's Host addresses.
type HostKind uint8

const (
	// HostOwn is any host outside the wildcard domain (an IP literal, localhost, another
	// name): the relay's own API and operations surface.
	HostOwn HostKind = iota
	// HostCircuit is a registered circuit subdomain; every path belongs to its model service.
	HostCircuit
	// HostAggregation is the bare wildcard apex or a configured aggregation host: requests
	// route by model name across the circuits the caller may use.
	HostAggregation
	// HostUnknown is inside the wildcard domain but no circuit has that subdomain.
	HostUnknown
)

func (k HostKind) String() string {
	switch k {
	case HostCircuit:
		return "circuit"
	case HostAggregation:
		return "aggregation"
	case HostUnknown:
		return "unknown-subdomain"
	default:
		return "own"
	}
}

// Resolution is the answer for one host.
type Resolution struct {
	Kind      HostKind
	Circuit   *Circuit // set for HostCircuit; shared with the table, do not modify
	Subdomain string   // set for HostCircuit and HostUnknown
}

// Problem is the refusal a resolution implies: 400 for an unknown subdomain, nil otherwise.
func (r Resolution) Problem() *Problem {
	if r.Kind == HostUnknown {
		return UnknownSubdomain(r.Subdomain)
	}
	return nil
}

// Table maps hosts to circuits. It is immutable once built, so any number of requests may read
// it while the next reconcile builds its successor.
type Table struct {
	suffix      string // wildcard domain with its leading dot, lowercased
	apex        string // suffix without the dot
	aggregation map[string]struct{}
	bySubdomain map[string]*Circuit
	byPool      map[string]*Circuit
	n           int
}

// NewTable builds a table from the circuits to serve. Circuits are copied; subdomains are
// lowercased; a circuit without a subdomain cannot be addressed by host but still counts for
// aggregation (ByPool). When two circuits claim one subdomain, the later one in the slice wins.
// Config values are normalized here, but validating them (leading dot) is the config's job.
func NewTable(cfg Config, circuits []Circuit) *Table {
	t := &Table{
		aggregation: make(map[string]struct{}, len(cfg.AggregationHosts)),
		bySubdomain: make(map[string]*Circuit, len(circuits)),
		byPool:      make(map[string]*Circuit, len(circuits)),
		n:           len(circuits),
	}
	if d := strings.Trim(lowerASCII(cfg.WildcardDomain), "."); d != "" {
		t.apex, t.suffix = d, "."+d
	}
	for _, h := range cfg.AggregationHosts {
		if h = normalizeHost(h); h != "" {
			t.aggregation[h] = struct{}{}
		}
	}
	owned := make([]Circuit, len(circuits))
	for i := range circuits {
		c := &owned[i]
		*c = circuits[i]
		c.Subdomain = lowerASCII(c.Subdomain)
		if c.Subdomain != "" {
			t.bySubdomain[c.Subdomain] = c
		}
		if c.Pool != "" {
			t.byPool[c.Pool] = c
		}
	}
	return t
}

// Resolve classifies a host as returned by Host. Aggregation hosts are checked first, so an
// operator may place one inside the wildcard domain. A nil table resolves everything as HostOwn.
func (t *Table) Resolve(host string) Resolution {
	if t == nil {
		return Resolution{Kind: HostOwn}
	}
	if _, ok := t.aggregation[host]; ok {
		return Resolution{Kind: HostAggregation}
	}
	if t.suffix == "" {
		return Resolution{Kind: HostOwn}
	}
	if host == t.apex {
		return Resolution{Kind: HostAggregation}
	}
	// The suffix starts with a dot, so "evilmodels.example.com" is not inside
	// ".models.example.com"; labels left of it are looked up whole ("a.b").
	sub, inside := strings.CutSuffix(host, t.suffix)
	if !inside {
		return Resolution{Kind: HostOwn}
	}
	if c, ok := t.bySubdomain[sub]; ok {
		return Resolution{Kind: HostCircuit, Circuit: c, Subdomain: sub}
	}
	return Resolution{Kind: HostUnknown, Subdomain: sub}
}

// ByPool returns the circuit a relay pool serves, or nil when the pool is not a circuit's.
func (t *Table) ByPool(pool string) *Circuit {
	if t == nil {
		return nil
	}
	return t.byPool[pool]
}

// Len is the number of circuits in the table.
func (t *Table) Len() int {
	if t == nil {
		return 0
	}
	return t.n
}
