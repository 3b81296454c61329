package appproxy

import "modelrelay/protocol"

// Status is the worker's part of /health.
type Status struct {
	Authority  string `json:"authority"`
	Node       string `json:"node"` // this replica: node_id when set, else the hostname
	WorkerID   string `json:"worker_id"`
	Registered bool   `json:"registered"`
	// Nodes is the authority's node count as the coordinator last answered (registration or
	// heartbeat): every node's registration adds one, a deregistration takes one off.
	Nodes           int  `json:"nodes"`
	EventsConnected bool `json:"events_connected"`
	Circuits        int  `json:"circuits"`
	LastHeartbeatOK bool `json:"last_heartbeat_ok"`
}

// Status is safe to call from any goroutine.
func (w *Worker) Status() Status {
	w.mu.Lock()
	s := Status{
		Authority:       w.cfg.Registration.Authority,
		Node:            w.node,
		WorkerID:        w.workerID,
		Registered:      w.registered,
		Nodes:           w.nodes,
		LastHeartbeatOK: w.lastHeartbeatOK,
	}
	w.mu.Unlock()
	s.EventsConnected = w.sub != nil && w.sub.Connected()
	s.Circuits = w.store.Len()
	return s
}

// Circuits is the current circuit set, ordered by id.
func (w *Worker) Circuits() []protocol.Circuit { return w.store.Circuits() }
