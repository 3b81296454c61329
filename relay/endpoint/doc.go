// Package endpoint is the one table of the inference calls the relay parses: for each path, its
// API family, its counterpart in the other family, its OpenTelemetry GenAI operation, and
// whether its body carries a prompt worth placing by and its answer carries token usage. The
// relay's routes, its stages, the AppProxy front and the worker all read it; a new inference
// path is one new row.
//
// It also holds how each API family names an HTTP status in an error body, the one table for
// the errors the relay writes, the errors a worker makes up, and a target's errors translated
// into the client's family.
//
// It is a leaf: data and pure functions, imported by relay, relay/translate and relay/daemon
// alike.
package endpoint
