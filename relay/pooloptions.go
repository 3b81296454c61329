package relay

import (
	"strconv"
	"time"

	"modelrelay/relay/rawjson"
)

// poolOptions are what a pool-aware client asks of the relay in x_pool_options: its own
// fallback chain, and what scheduling should do for it. Unknown keys are ignored; the object
// never reaches a target.
type poolOptions struct {
	fallbacks  []string      // replaces the configured chain (nil = keep it)
	maxLatency time.Duration // refuse rather than queue longer (0 = any wait)
	priority   string        // high, normal or low ("" = not said)
	preferGPU  string        // a target id or name that gets the request whenever it has room
}

// parsePoolOptions reads x_pool_options, a checked JSON value; a wrong type of a known key is
// the client's error. Its members are read as encoding/json reads them into a struct: names
// case-insensitively, the last of a name given twice, null as not given.
func parsePoolOptions(raw []byte) (*poolOptions, error) {
	o := &poolOptions{}
	if string(raw) == "null" {
		return o, nil
	}
	if raw[0] != '{' {
		return nil, badRequest("x_pool_options must be an object")
	}
	var fallbacks, maxLatency, priority, prefer []byte
	members := rawjson.ObjectAt(raw, 0, rawjson.Checked)
	var m rawjson.Member
	for members.Next(&m) {
		v := raw[m.Value:m.End]
		switch {
		case rawjson.FieldIs(m.Key, "fallback_models"):
			fallbacks = v
		case rawjson.FieldIs(m.Key, "max_latency_ms"):
			maxLatency = v
		case rawjson.FieldIs(m.Key, "priority"):
			priority = v
		case rawjson.FieldIs(m.Key, "prefer_gpu"):
			prefer = v
		}
	}
	if given(fallbacks) {
		var ok bool
		if o.fallbacks, ok = modelList(fallbacks); !ok {
			return nil, badRequest("x_pool_options.fallback_models must be a list of model names")
		}
	}
	if given(maxLatency) {
		ms, err := strconv.ParseFloat(string(maxLatency), 64) // out of range: an error, as to encoding/json
		if c := maxLatency[0]; (c != '-' && (c < '0' || c > '9')) || err != nil || ms <= 0 || ms > 1e9 {
			return nil, badRequest("x_pool_options.max_latency_ms must be a positive number of milliseconds")
		}
		o.maxLatency = time.Duration(ms * float64(time.Millisecond))
	}
	if given(priority) {
		o.priority = rawjson.String(priority)
		if _, ok := parsePriority(o.priority); priority[0] != '"' || !ok {
			return nil, badRequest("x_pool_options.priority must be high, normal or low")
		}
	}
	if given(prefer) {
		if prefer[0] != '"' {
			return nil, badRequest("x_pool_options.prefer_gpu must be a target id or name")
		}
		o.preferGPU = rawjson.String(prefer)
	}
	return o, nil
}

// given says whether an optional member was sent with a value (null counts as not sent).
func given(v []byte) bool { return len(v) > 0 && string(v) != "null" }

// modelList reads a checked JSON array of model names: strings, none empty. An empty list is
// a list (not nil): no fallback for this request.
func modelList(v []byte) ([]string, bool) {
	if v[0] != '[' {
		return nil, false
	}
	names := []string{}
	a := rawjson.ArrayAt(v, 0, rawjson.Checked)
	for {
		start, end, ok := a.Next()
		if !ok {
			return names, true
		}
		name := rawjson.String(v[start:end])
		if name == "" {
			return nil, false // not a string, or an empty one
		}
		names = append(names, name)
	}
}
