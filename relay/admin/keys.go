package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"modelrelay/relay"
	"modelrelay/relay/keys"
	"modelrelay/relay/rawjson"
)

// The admin API of client keys: the Rust server's create, list and revoke (same statuses and
// shapes), with our limits as optional fields of the same objects, PATCH to change them, and
// each key's usage.

func (s *Surface) keyRoutes() {
	s.relay.Mount("GET /admin/keys", s.admin(s.handleListKeys))
	s.relay.Mount("POST /admin/keys", s.admin(s.handleCreateKey))
	s.relay.Mount("DELETE /admin/keys/{id}", s.admin(s.handleRevokeKey))
	s.relay.Mount("PATCH /admin/keys/{id}", s.admin(s.handlePatchKey))
	s.relay.Mount("GET /admin/keys/{id}/usage", s.admin(s.handleKeyUsage))
}

// keyView is a key as the admin API shows it: the Rust server's fields (times in Unix
// seconds), then ours (null when unset).
type keyView struct {
	ID            string   `json:"id"`
	Name          string   `json:"name"`
	Prefix        string   `json:"prefix"`
	CreatedAt     int64    `json:"created_at"`
	LastUsedAt    *int64   `json:"last_used_at"`
	Revoked       bool     `json:"revoked"`
	AllowedModels []string `json:"allowed_models"`
	RateLimitRPM  *int     `json:"rate_limit_rpm"`
	TokenLimitTPM *int     `json:"token_limit_tpm"`
	Priority      *string  `json:"priority"`
	MaxPriority   *string  `json:"max_priority"`
	ExpiresAt     *string  `json:"expires_at"`
	Cache         *string  `json:"cache"`
	Secret        string   `json:"secret,omitempty"`  // in the answer to create only
	Warning       string   `json:"warning,omitempty"` // in the answer to create only
}

// keysOptional is the warning of the admin API while keys are not required: a key is real (it
// is checked, limited and accounted when a client sends it), but it keeps nobody out.
const keysOptional = "require_api_keys is off: a key is checked when a client sends it, " +
	"but requests without a key are still served"

func viewOf(k keys.Key) keyView {
	v := keyView{ID: k.ID, Name: k.Name, Prefix: k.Prefix, CreatedAt: k.CreatedAt.Unix(), Revoked: !k.RevokedAt.IsZero(),
		AllowedModels: k.AllowedModels}
	if !k.LastUsedAt.IsZero() {
		t := k.LastUsedAt.Unix()
		v.LastUsedAt = &t
	}
	if k.RateLimitRPM > 0 {
		v.RateLimitRPM = &k.RateLimitRPM
	}
	if k.TokenLimitTPM > 0 {
		v.TokenLimitTPM = &k.TokenLimitTPM
	}
	if k.Priority != "" {
		v.Priority = &k.Priority
	}
	if k.MaxPriority != "" {
		v.MaxPriority = &k.MaxPriority
	}
	if !k.ExpiresAt.IsZero() {
		t := k.ExpiresAt.UTC().Format(time.RFC3339Nano)
		v.ExpiresAt = &t
	}
	if k.Cache != "" {
		v.Cache = &k.Cache
	}
	return v
}

// keyLimits is the optional part of a create or change: absent members stay as they are
// (PATCH) or unset (POST); null clears.
type keyLimits struct {
	AllowedModels json.RawMessage `json:"allowed_models"`
	RateLimitRPM  json.RawMessage `json:"rate_limit_rpm"`
	TokenLimitTPM json.RawMessage `json:"token_limit_tpm"`
	Priority      json.RawMessage `json:"priority"`
	MaxPriority   json.RawMessage `json:"max_priority"`
	ExpiresAt     json.RawMessage `json:"expires_at"`
	Cache         json.RawMessage `json:"cache"`
}

// Bounds on what one key may hold, so the admin API cannot be made to store without end.
const (
	maxKeyName      = 256
	maxAllowedGlobs = 64
	maxGlobLen      = 256
	maxAdminBody    = 64 << 10
)

// patch turns the members sent into a keys.Patch, or says which member is wrong.
func (l keyLimits) patch() (keys.Patch, error) {
	var p keys.Patch
	sent := func(raw json.RawMessage) bool { return raw != nil }
	null := func(raw json.RawMessage) bool { return string(raw) == "null" }
	if raw := l.AllowedModels; sent(raw) {
		var globs []string
		if !null(raw) {
			if err := json.Unmarshal(raw, &globs); err != nil || len(globs) > maxAllowedGlobs {
				return p, fmt.Errorf("allowed_models must be an array of at most %d model names or globs", maxAllowedGlobs)
			}
			for _, g := range globs {
				if g == "" || len(g) > maxGlobLen {
					return p, fmt.Errorf("allowed_models entries must be 1 to %d characters", maxGlobLen)
				}
			}
		}
		p.AllowedModels = &globs
	}
	for _, f := range []struct {
		name string
		raw  json.RawMessage
		dst  **int
	}{{"rate_limit_rpm", l.RateLimitRPM, &p.RateLimitRPM}, {"token_limit_tpm", l.TokenLimitTPM, &p.TokenLimitTPM}} {
		if !sent(f.raw) {
			continue
		}
		n := 0
		if !null(f.raw) {
			if err := json.Unmarshal(f.raw, &n); err != nil || n < 0 {
				return p, fmt.Errorf("%s must be a non-negative integer or null", f.name)
			}
		}
		*f.dst = &n
	}
	for _, f := range []struct {
		name string
		raw  json.RawMessage
		dst  **string
	}{{"priority", l.Priority, &p.Priority}, {"max_priority", l.MaxPriority, &p.MaxPriority}} {
		if !sent(f.raw) {
			continue
		}
		var name string
		if !null(f.raw) {
			if err := json.Unmarshal(f.raw, &name); err != nil || !relay.IsPriority(name) {
				return p, fmt.Errorf("%s must be high, normal, low or null", f.name)
			}
		}
		*f.dst = &name
	}
	if raw := l.ExpiresAt; sent(raw) {
		var at time.Time
		if !null(raw) {
			var text string
			err := json.Unmarshal(raw, &text)
			if err == nil {
				at, err = time.Parse(time.RFC3339Nano, text)
			}
			if err != nil {
				return p, errors.New("expires_at must be an RFC 3339 time or null")
			}
			at = at.UTC().Truncate(time.Microsecond)
		}
		p.ExpiresAt = &at
	}
	if raw := l.Cache; sent(raw) {
		var use string
		if !null(raw) {
			if err := json.Unmarshal(raw, &use); err != nil || (use != keys.CacheDefault && use != keys.CacheOff) {
				return p, errors.New("cache must be default, off or null")
			}
		}
		p.Cache = &use
	}
	return p, nil
}

// readAdminBody decodes a JSON object body into v, answering 400 itself when it cannot, with
// what is wrong in the body's own terms ("rate_limit_rpm must be an integer").
func readAdminBody(w http.ResponseWriter, r *http.Request, v any) bool {
	raw, err := io.ReadAll(io.LimitReader(r.Body, maxAdminBody+1))
	var why string
	switch {
	case err != nil:
		why = "request body could not be read"
	case len(raw) > maxAdminBody:
		why = fmt.Sprintf("request body exceeds %d bytes", maxAdminBody)
	default:
		if err := json.Unmarshal(raw, v); err != nil {
			why = rawjson.Explain(raw, err)
		}
	}
	if why != "" {
		fail(w, http.StatusBadRequest, why)
		return false
	}
	return true
}

// storeFailed answers an admin call the key store could not serve: 500, as the Rust server.
func (s *Surface) storeFailed(w http.ResponseWriter, op string, err error) {
	s.opts.Logger.Error("key store failed", "op", op, "err", err)
	fail(w, http.StatusInternalServerError, op+": "+err.Error())
}

func (s *Surface) handleCreateKey(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Name *string `json:"name"`
		keyLimits
	}
	if !readAdminBody(w, r, &body) {
		return
	}
	if body.Name == nil || len(*body.Name) > maxKeyName {
		fail(w, http.StatusBadRequest, fmt.Sprintf("name is required (a string of at most %d bytes)", maxKeyName))
		return
	}
	p, err := body.patch()
	if err != nil {
		fail(w, http.StatusBadRequest, err.Error())
		return
	}
	secret, prefix := keys.NewSecret()
	k, err := s.relay.Keys().Store().Insert(r.Context(), keys.Key{ID: keys.NewID(), Name: *body.Name, Prefix: prefix,
		Limits: p.Apply(keys.Limits{})}, keys.HashOf(secret))
	if err != nil {
		s.storeFailed(w, "create key", err)
		return
	}
	v := viewOf(k)
	v.Secret = secret
	if s.opts.RequireAPIKeys {
		s.opts.Logger.Info("API key created", "key_id", k.ID, "name", k.Name, "prefix", k.Prefix)
	} else {
		// An operator who creates a key may believe it now guards the relay: say it does not.
		s.opts.Logger.Warn("API key created while require_api_keys is off: requests that send it are checked, requests without a key are still served",
			"key_id", k.ID, "name", k.Name, "prefix", k.Prefix)
		v.Warning = keysOptional
	}
	relay.WriteJSON(w, http.StatusCreated, v)
}

func (s *Surface) handleListKeys(w http.ResponseWriter, r *http.Request) {
	list, err := s.relay.Keys().Store().List(r.Context())
	if err != nil {
		s.storeFailed(w, "list keys", err)
		return
	}
	views := make([]keyView, len(list))
	for i, k := range list {
		views[i] = viewOf(k)
	}
	answer := map[string]any{"keys": views}
	if !s.opts.RequireAPIKeys {
		answer["warning"] = keysOptional // what /ui shows over the list
	}
	relay.WriteJSON(w, http.StatusOK, answer)
}

func (s *Surface) handleRevokeKey(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	ok, err := s.relay.Keys().Store().Revoke(r.Context(), id)
	switch {
	case err != nil:
		s.storeFailed(w, "revoke key", err)
	case !ok:
		w.WriteHeader(http.StatusNotFound)
	default:
		s.relay.Keys().Forget(id)
		s.opts.Logger.Info("API key revoked", "key_id", id)
		w.WriteHeader(http.StatusNoContent)
	}
}

func (s *Surface) handlePatchKey(w http.ResponseWriter, r *http.Request) {
	var body keyLimits
	if !readAdminBody(w, r, &body) {
		return
	}
	p, err := body.patch()
	if err != nil {
		fail(w, http.StatusBadRequest, err.Error())
		return
	}
	id := r.PathValue("id")
	k, ok, err := s.relay.Keys().Store().Update(r.Context(), id, p)
	switch {
	case err != nil:
		s.storeFailed(w, "change key", err)
	case !ok:
		fail(w, http.StatusNotFound, "unknown key "+id)
	default:
		s.relay.Keys().Forget(id)
		s.opts.Logger.Info("API key changed", "key_id", id)
		relay.WriteJSON(w, http.StatusOK, viewOf(k))
	}
}

type usageView struct {
	Day          string `json:"day"`
	Model        string `json:"model"`
	Requests     int64  `json:"requests"`
	InputTokens  int64  `json:"input_tokens"`
	OutputTokens int64  `json:"output_tokens"`
}

// handleKeyUsage answers a key's usage by UTC day and model. What this node has not written
// yet is written first, so the answer includes it.
func (s *Surface) handleKeyUsage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	store := s.relay.Keys().Store()
	_, ok, err := store.Get(r.Context(), id)
	if err == nil && ok {
		s.relay.Ledger().Flush(r.Context()) // a failure leaves the rows pending; the read below says if the store is down
		var rows []keys.Usage
		rows, err = store.Usage(r.Context(), id)
		if err == nil {
			out := make([]usageView, len(rows))
			for i, u := range rows {
				out[i] = usageView{u.Day.Format(time.DateOnly), u.Model, u.Requests, u.InputTokens, u.OutputTokens}
			}
			relay.WriteJSON(w, http.StatusOK, map[string]any{"key_id": id, "usage": out})
			return
		}
	}
	switch {
	case err != nil:
		s.storeFailed(w, "read usage", err)
	default:
		fail(w, http.StatusNotFound, "unknown key "+id)
	}
}
