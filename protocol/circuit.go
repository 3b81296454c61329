package protocol

import (
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// Circuit is the coordinator's binding of a frontend slot to the replicas (routes) behind it.
// Nullable keys are pointers so a circuit written back out carries null where the coordinator
// sent null; timestamps stay the text the coordinator sent, because the ack must not re-render
// them.
type Circuit struct {
	ID               string         `json:"id"`
	App              string         `json:"app"`
	Protocol         string         `json:"protocol"`
	Worker           string         `json:"worker"`
	AppMode          string         `json:"app_mode"`
	FrontendMode     string         `json:"frontend_mode"`
	Envs             map[string]any `json:"envs"`
	Arguments        *string        `json:"arguments"`
	OpenToPublic     bool           `json:"open_to_public"`
	AllowedClientIPs *string        `json:"allowed_client_ips"`
	Port             *int           `json:"port"`
	Subdomain        *string        `json:"subdomain"`
	UserID           *string        `json:"user_id"`
	EndpointID       *string        `json:"endpoint_id"`
	RuntimeVariant   *string        `json:"runtime_variant"`
	RouteInfo        []Route        `json:"route_info"`
	SessionIDs       []string       `json:"session_ids"`
	CreatedAt        string         `json:"created_at"`
	UpdatedAt        string         `json:"updated_at"`
}

// Values the coordinator uses for a circuit we can serve.
const (
	AppModeInference     = "inference"
	FrontendModeWildcard = "wildcard"
)

// circuitFields avoids recursion into Circuit's own MarshalJSON.
type circuitFields Circuit

// MarshalJSON writes empty collections as [] and {} because the coordinator validates circuit
// objects in full and a null list is not a list.
func (c Circuit) MarshalJSON() ([]byte, error) {
	out := circuitFields(c)
	if out.Envs == nil {
		out.Envs = map[string]any{}
	}
	if out.RouteInfo == nil {
		out.RouteInfo = []Route{}
	}
	if out.SessionIDs == nil {
		out.SessionIDs = []string{}
	}
	return json.Marshal(out)
}

// UnmarshalJSON requires an object with a string id; everything else is taken as found.
func (c *Circuit) UnmarshalJSON(b []byte) error {
	var in circuitFields
	if err := json.Unmarshal(b, &in); err != nil {
		return fmt.Errorf("circuit: %w", err)
	}
	if in.ID == "" {
		return fmt.Errorf("circuit: missing id")
	}
	*c = Circuit(in)
	return nil
}

// Serveable reports whether this relay can address the circuit: only inference circuits in
// wildcard mode with a subdomain reach us by Host.
func (c Circuit) Serveable() bool { return c.IgnoreReason() == "" }

// IgnoreReason says why a circuit is not served, for the log line; "" when it is served.
func (c Circuit) IgnoreReason() string {
	switch {
	case c.AppMode != AppModeInference:
		return "app_mode " + strconv.Quote(c.AppMode) + " is not inference"
	case c.FrontendMode != FrontendModeWildcard:
		return "frontend_mode " + strconv.Quote(c.FrontendMode) + " is not wildcard"
	case c.Subdomain == nil || strings.TrimSpace(*c.Subdomain) == "":
		return "no subdomain"
	}
	return ""
}

// Host is the subdomain as the ingress compares it (lowercased); "" when there is none.
func (c Circuit) Host() string {
	if c.Subdomain == nil {
		return ""
	}
	return strings.ToLower(strings.TrimSpace(*c.Subdomain))
}

// CircuitList is the body of GET /api/worker/<id>/circuits.
type CircuitList struct {
	Circuits []Circuit `json:"circuits"`
}

// DecodeCircuits decodes a JSON array of circuit objects (the circuits_json of an event).
func DecodeCircuits(data []byte) ([]Circuit, error) {
	var cs []Circuit
	if err := json.Unmarshal(data, &cs); err != nil {
		return nil, fmt.Errorf("decode circuits: %w", err)
	}
	if cs == nil {
		return nil, fmt.Errorf("decode circuits: not a list")
	}
	return cs, nil
}

// DecodeCircuitList decodes a circuit pull answer ({"circuits":[…]}); a null list is empty.
func DecodeCircuitList(data []byte) ([]Circuit, error) {
	var l struct {
		Circuits json.RawMessage `json:"circuits"`
	}
	if err := json.Unmarshal(data, &l); err != nil {
		return nil, fmt.Errorf("decode circuit list: %w", err)
	}
	switch string(l.Circuits) {
	case "":
		return nil, fmt.Errorf("decode circuit list: no circuits key")
	case "null":
		return []Circuit{}, nil
	}
	return DecodeCircuits(l.Circuits)
}

// Route is one replica of a circuit.
type Route struct {
	RouteID      *string `json:"route_id"`
	SessionID    string  `json:"session_id"`
	SessionName  *string `json:"session_name"`
	KernelHost   *string `json:"kernel_host"`
	KernelPort   int     `json:"kernel_port"`
	Protocol     string  `json:"protocol"`
	TrafficRatio float64 `json:"traffic_ratio"`
	// Health fields exist in releases up to 26.4.3 only; they are written back only when
	// received. LastHealthCheck is kept raw because its type is not part of our contract.
	HealthStatus        *string         `json:"health_status,omitempty"`
	LastHealthCheck     json.RawMessage `json:"last_health_check,omitempty"`
	ConsecutiveFailures *int            `json:"consecutive_failures,omitempty"`
}

// Route health values sent by older coordinators.
const (
	HealthHealthy   = "healthy"
	HealthUnhealthy = "unhealthy"
)

// DefaultTrafficRatio applies when a route carries no traffic_ratio.
const DefaultTrafficRatio = 1.0

// Host is where the replica listens: a null kernel_host means the coordinator's localhost.
func (r Route) Host() string {
	if r.KernelHost == nil || *r.KernelHost == "" {
		return "localhost"
	}
	return *r.KernelHost
}

// Addr is host:port for dialing the replica.
func (r Route) Addr() string { return net.JoinHostPort(r.Host(), strconv.Itoa(r.KernelPort)) }

// Unhealthy reports whether the coordinator marked the route unhealthy (older releases only).
func (r Route) Unhealthy() bool { return r.HealthStatus != nil && *r.HealthStatus == HealthUnhealthy }

// Valid checks what a route needs to be dialed.
func (r Route) Valid() error {
	if r.KernelPort < 1 || r.KernelPort > 65535 {
		return fmt.Errorf("route %s: kernel_port %d out of range", r.SessionID, r.KernelPort)
	}
	if r.TrafficRatio < 0 {
		return fmt.Errorf("route %s: negative traffic_ratio", r.SessionID)
	}
	return nil
}

// routeKeys lists, per field, the snake_case key and its kebab-case alias; snake_case wins when
// both are present.
var routeKeys = []struct{ snake, kebab string }{
	{"route_id", "route-id"},
	{"session_id", "session-id"},
	{"session_name", "session-name"},
	{"kernel_host", "kernel-host"},
	{"kernel_port", "kernel-port"},
	{"protocol", ""},
	{"traffic_ratio", ""},
	{"health_status", ""},
	{"last_health_check", ""},
	{"consecutive_failures", ""},
}

// UnmarshalJSON accepts snake_case and kebab-case keys. The health fields are advisory, so a
// value of an unexpected type there is dropped rather than failing the whole circuit.
func (r *Route) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("route: %w", err)
	}
	if raw == nil {
		return fmt.Errorf("route: null")
	}
	pick := func(i int) json.RawMessage {
		k := routeKeys[i]
		if v, ok := raw[k.snake]; ok {
			return v
		}
		if k.kebab != "" {
			return raw[k.kebab]
		}
		return nil
	}
	out := Route{TrafficRatio: DefaultTrafficRatio}
	required := []struct {
		key string
		v   json.RawMessage
		dst any
	}{
		{"route_id", pick(0), &out.RouteID},
		{"session_id", pick(1), &out.SessionID},
		{"session_name", pick(2), &out.SessionName},
		{"kernel_host", pick(3), &out.KernelHost},
		{"kernel_port", pick(4), &out.KernelPort},
		{"protocol", pick(5), &out.Protocol},
	}
	for _, f := range required {
		if f.v == nil {
			continue
		}
		if err := json.Unmarshal(f.v, f.dst); err != nil {
			return fmt.Errorf("route %s: %w", f.key, err)
		}
	}
	if v := pick(6); v != nil && string(v) != "null" {
		if err := json.Unmarshal(v, &out.TrafficRatio); err != nil {
			return fmt.Errorf("route traffic_ratio: %w", err)
		}
	}
	if json.Unmarshal(pick(7), &out.HealthStatus) != nil {
		out.HealthStatus = nil
	}
	if v := pick(8); v != nil && string(v) != "null" {
		out.LastHealthCheck = append(json.RawMessage(nil), v...)
	}
	if json.Unmarshal(pick(9), &out.ConsecutiveFailures) != nil {
		out.ConsecutiveFailures = nil
	}
	*r = out
	return nil
}
