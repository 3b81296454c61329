// Package responses keeps the Responses API's stored responses: what `store` keeps of a finished
// response (the answer a GET returns, and the conversation a later previous_response_id
// continues), for a TTL, in this process's memory or in Redis for every node.
//
// A record belongs to the client key that created it; the relay checks the owner, the store
// only keeps it. Values are opaque bytes here: nothing of the relay's own.
package responses

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Record is one stored response.
type Record struct {
	Owner    string          `json:"owner"`    // the client key's id ("" without keys)
	Response json.RawMessage `json:"response"` // the response object, as the client got it
	Items    json.RawMessage `json:"items"`    // the conversation: its input items, then its output items
}

// size is what a record holds in memory.
func (r *Record) size() int64 { return int64(len(r.Owner) + len(r.Response) + len(r.Items) + 64) }

// ErrUnavailable is matched by a store's error when it cannot answer (Redis down): the relay
// answers as it would for an unknown id, and says so in its log.
var ErrUnavailable = errors.New("responses store unavailable")

// Store keeps records by response id.
type Store interface {
	// Get returns the record of id, or false when there is none (unknown or expired).
	Get(ctx context.Context, id string) (*Record, bool, error)
	// Put keeps r under id for the store's TTL.
	Put(ctx context.Context, id string, r *Record) error
	// Delete removes id and reports whether it was there.
	Delete(ctx context.Context, id string) (bool, error)
}

// Defaults for a store nobody configured otherwise.
const (
	DefaultTTL      = time.Hour
	DefaultMaxBytes = 256 << 20
)
