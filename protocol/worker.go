package protocol

import (
	"encoding/json"
	"fmt"
)

// WorkerRegistration is the body of PUT /api/worker. The coordinator requires every key, so
// nothing here is omitempty (nullable keys are pointers written as null) but NodeID: older
// coordinators reject unknown fields, so it is sent only when set.
type WorkerRegistration struct {
	Authority                 string           `json:"authority"`
	FrontendMode              string           `json:"frontend_mode"`
	Protocol                  string           `json:"protocol"`
	Hostname                  string           `json:"hostname"`
	TLSListen                 bool             `json:"tls_listen"`
	TLSAdvertised             bool             `json:"tls_advertised"`
	APIPort                   int              `json:"api_port"`
	PortRange                 *[2]int          `json:"port_range"`
	WildcardDomain            *string          `json:"wildcard_domain"`
	WildcardTrafficPort       *int             `json:"wildcard_traffic_port"`
	FilteredAppsOnly          bool             `json:"filtered_apps_only"`
	TraefikLastUsedMarkerPath *string          `json:"traefik_last_used_marker_path"`
	AcceptedTraffics          []string         `json:"accepted_traffics"`
	AppFilters                []map[string]any `json:"app_filters"`
	// NodeID names this replica of an HA worker (several nodes share one authority) to a
	// coordinator that tracks nodes.
	NodeID string `json:"node_id,omitempty"`
}

// Traffic kinds a worker accepts.
const TrafficInference = "inference"

// NewInferenceRegistration is the registration of an inference-only wildcard worker, the only
// kind this relay is.
func NewInferenceRegistration(authority, hostname string, apiPort int, tlsListen, tlsAdvertised bool,
	wildcardDomain string, wildcardTrafficPort int) WorkerRegistration {
	return WorkerRegistration{
		Authority:           authority,
		FrontendMode:        FrontendModeWildcard,
		Protocol:            "http",
		Hostname:            hostname,
		TLSListen:           tlsListen,
		TLSAdvertised:       tlsAdvertised,
		APIPort:             apiPort,
		WildcardDomain:      &wildcardDomain,
		WildcardTrafficPort: &wildcardTrafficPort,
		AcceptedTraffics:    []string{TrafficInference},
		AppFilters:          []map[string]any{},
	}
}

type registrationFields WorkerRegistration

// MarshalJSON writes empty lists as [] because the coordinator's schema rejects null lists.
func (r WorkerRegistration) MarshalJSON() ([]byte, error) {
	out := registrationFields(r)
	if out.AcceptedTraffics == nil {
		out.AcceptedTraffics = []string{}
	}
	if out.AppFilters == nil {
		out.AppFilters = []map[string]any{}
	}
	return json.Marshal(out)
}

// Worker is the coordinator's record of a worker, as answered by register and heartbeat. Only
// ID is needed to go on; the rest is kept for status and logs.
type Worker struct {
	ID                  string          `json:"id"`
	Authority           string          `json:"authority"`
	FrontendMode        string          `json:"frontend_mode"`
	Protocol            string          `json:"protocol"`
	Hostname            string          `json:"hostname"`
	TLSListen           bool            `json:"tls_listen"`
	TLSAdvertised       bool            `json:"tls_advertised"`
	APIPort             int             `json:"api_port"`
	WildcardDomain      *string         `json:"wildcard_domain"`
	WildcardTrafficPort *int            `json:"wildcard_traffic_port"`
	AcceptedTraffics    []string        `json:"accepted_traffics"`
	Status              string          `json:"status,omitempty"`
	AvailableSlots      int             `json:"available_slots"`
	OccupiedSlots       int             `json:"occupied_slots"`
	Nodes               int             `json:"nodes"`
	Slots               json.RawMessage `json:"slots,omitempty"`
	CreatedAt           string          `json:"created_at,omitempty"`
	UpdatedAt           string          `json:"updated_at,omitempty"`
}

// DecodeWorker decodes a worker object. A field of a type we did not expect (the coordinator's
// schema drifts between releases) must not cost us the id, so the decode falls back to id and
// authority alone.
func DecodeWorker(data []byte) (Worker, error) {
	var w Worker
	if err := json.Unmarshal(data, &w); err != nil {
		var min struct {
			ID        string `json:"id"`
			Authority string `json:"authority"`
		}
		if err2 := json.Unmarshal(data, &min); err2 != nil {
			return Worker{}, fmt.Errorf("decode worker: %w", err)
		}
		w = Worker{ID: min.ID, Authority: min.Authority}
	}
	if w.ID == "" {
		return Worker{}, fmt.Errorf("decode worker: missing id")
	}
	return w, nil
}
