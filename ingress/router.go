package ingress

import "sync/atomic"

// Router holds the current Table. Reconcile swaps in a new table; requests load whichever is
// current without taking a lock, and a request keeps the table it loaded even if a swap follows.
type Router struct {
	table atomic.Pointer[Table]
}

// NewRouter starts with t (which may be an empty table built from the configuration, so that
// wildcard hosts answer "unknown subdomain" rather than reaching the relay's own surface before
// the first circuit pull).
func NewRouter(t *Table) *Router {
	r := &Router{}
	r.table.Store(t)
	return r
}

// Swap installs t and returns the table it replaced.
func (r *Router) Swap(t *Table) *Table { return r.table.Swap(t) }

// Table returns the current table (nil before the first Swap on a zero Router).
func (r *Router) Table() *Table { return r.table.Load() }

// Resolve resolves host against the current table.
func (r *Router) Resolve(host string) Resolution { return r.table.Load().Resolve(host) }
