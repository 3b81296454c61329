// Package appproxy is the relay's side of the Backend.AI AppProxy control plane: the coordinator
// REST client (Coordinator), the Redis event subscription and ack publisher (Subscriber, Acker),
// the circuit set (Store), the lifecycle that ties them together (Worker), and last-used
// statistics (Markers). It knows nothing of HTTP serving: changes leave through the injected
// ApplyFunc, which the reconcile package provides.
package appproxy
