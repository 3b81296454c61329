// Package ingress decides who may reach which circuit: it turns a request's Host into a circuit,
// an aggregation host or the relay's own surface, finds the real client address behind trusted
// proxies, applies a circuit's client-IP allow-list and verifies its HS256 bearer token, and
// renders every refusal as the problem JSON the Backend.AI AppProxy worker answers with. On
// the hosts that route by model it decides which circuits may serve a caller and which models
// the caller may list (Table.PoolsFor, Table.Models), so that a private circuit stays hidden.
//
// Per request the order is fixed by the AppProxy contract: circuit lookup, then the IP
// allow-list, then credentials. The circuit table is immutable and swapped whole on every
// reconcile, so the request path reads it without a lock. Nothing here caches a verification
// result: every request's token is checked afresh.
package ingress
