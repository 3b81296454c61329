package protocol

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// CleanModels applies the registration rule for model names: trim each, drop empty ones and
// exact duplicates, keeping the first-seen order.
func CleanModels(models []string) []string {
	out := make([]string, 0, len(models))
	seen := make(map[string]bool, len(models))
	for _, m := range models {
		m = strings.TrimSpace(m)
		if m == "" || seen[m] {
			continue
		}
		seen[m] = true
		out = append(out, m)
	}
	return out
}

// ModelList is the OpenAI model list: what GET /v1/models answers, and what the relay and the
// worker daemon read from a backend to discover its model ids.
type ModelList struct {
	Object string  `json:"object"`
	Data   []Model `json:"data"`
}

// Model is one entry of a ModelList.
type Model struct {
	ID      string `json:"id"`
	Object  string `json:"object,omitempty"`
	OwnedBy string `json:"owned_by,omitempty"`
}

// NewModelList lists ids as the relay advertises them.
func NewModelList(ids []string) ModelList {
	data := make([]Model, len(ids))
	for i, id := range ids {
		data[i] = Model{ID: id, Object: "model", OwnedBy: "worker-proxy"}
	}
	return ModelList{Object: "list", Data: data}
}

// DecodeModelIDs reads a model list of at most limit bytes and returns its ids, cleaned.
func DecodeModelIDs(r io.Reader, limit int64) ([]string, error) {
	var list ModelList
	if err := json.NewDecoder(io.LimitReader(r, limit)).Decode(&list); err != nil {
		return nil, fmt.Errorf("not a model list: %w", err)
	}
	ids := make([]string, len(list.Data))
	for i, m := range list.Data {
		ids[i] = m.ID
	}
	return CleanModels(ids), nil
}
