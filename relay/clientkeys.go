package relay

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"modelrelay/relay/keys"
)

// This file is the auth and admission stages of client API keys: who the client is, and
// whether its key lets this request in now.

// errKeyStoreDown answers a key the cache does not hold while the store cannot be reached:
// fail closed, and say so.
var errKeyStoreDown = &relayError{status: http.StatusServiceUnavailable,
	message: "API key could not be checked: the key store is unavailable", code: "key_store_unavailable", wait: time.Second}

// credential is the secret the client presented and the header it came in: x-api-key (what
// Anthropic clients send) or Authorization (Bearer, or the whole value as the Rust server
// reads it). A relay key ("mr_live_...") in either wins, so a client may carry its key in
// x-api-key and a circuit token in Authorization.
func credential(h http.Header) (secret, header string) {
	xkey := field(h, "X-Api-Key")
	auth := strings.TrimPrefix(field(h, "Authorization"), "Bearer ")
	switch {
	case strings.HasPrefix(xkey, keys.SecretPrefix):
		return xkey, "X-Api-Key"
	case strings.HasPrefix(auth, keys.SecretPrefix):
		return auth, "Authorization"
	case xkey != "":
		return xkey, "X-Api-Key"
	case auth != "":
		return auth, "Authorization"
	}
	return "", ""
}

// presentsKey reports whether the client sent one of the relay's keys. Where client keys
// apply, such a request is checked, limited and accounted even when keys are not required:
// its holder expects the key's limits and usage, and a wrong key must not pass as none.
func presentsKey(h http.Header) bool {
	secret, _ := credential(h)
	return strings.HasPrefix(secret, keys.SecretPrefix)
}

// carriesKey reports whether a credential header's value holds one of the relay's keys: the
// secret alone, or after an auth scheme ("Bearer mr_live_...", in any spacing or case).
func carriesKey(v string) bool {
	v = strings.TrimSpace(v)
	if scheme, rest, ok := strings.Cut(v, " "); ok && !strings.HasPrefix(scheme, keys.SecretPrefix) {
		v = strings.TrimSpace(rest)
	}
	return strings.HasPrefix(v, keys.SecretPrefix)
}

// dropKeys removes from h, headers on their way to a target, every credential header that
// carries one of the relay's keys. The keys are the relay's, never a target's: whether keys
// are required or not, and also where they do not apply (a circuit's own auth, a
// pass-through), a secret of ours must not reach a model server.
func dropKeys(h http.Header) {
	for _, name := range [...]string{"Authorization", "X-Api-Key"} {
		if slices.ContainsFunc(h[name], carriesKey) {
			delete(h, name)
		}
	}
}

// authorize is the auth stage. It returns the client's key, or nil after answering 401 (no
// key, or not a valid one) or 503 (the store cannot say).
func (s *Server) authorize(w http.ResponseWriter, r *http.Request, d Dialect, now time.Time) *keys.Key {
	secret, _ := credential(r.Header)
	if secret == "" {
		writeAuthError(w, d, "API key required")
		return nil
	}
	if !strings.HasPrefix(secret, keys.SecretPrefix) {
		// No key of ours (a circuit token, a cloud key): refused without asking the store,
		// and no guess at one either.
		writeAuthError(w, d, "Invalid API key")
		return nil
	}
	k, err := s.keys.Check(r.Context(), secret, now)
	switch {
	case err == nil:
		s.ledger.Touch(k.ID, now)
		return k
	case errors.Is(err, keys.ErrInvalid):
		// A wrong key is a guess: its answer waits its turn, like a wrong worker secret (429
		// when the address's turns are all taken).
		if !s.WrongCredential(r.Context(), "api_key", peerIP(r, s.opts.TrustedProxies)) {
			writeError(w, d, tooManyFailures)
			break
		}
		writeAuthError(w, d, "Invalid API key")
	case r.Context().Err() != nil:
	default:
		s.log.Warn("API key not checked: key store unavailable", "err", err)
		writeError(w, d, errKeyStoreDown)
	}
	return nil
}

// writeAuthError answers 401 with the Rust server's body on OpenAI routes and Anthropic's
// authentication_error on Anthropic ones.
func writeAuthError(w http.ResponseWriter, d Dialect, message string) {
	noteReason(w, message)
	var body []byte
	if d == Anthropic {
		body, _ = json.Marshal(map[string]any{"type": "error",
			"error": map[string]string{"type": d.ErrorType(http.StatusUnauthorized), "message": message}})
	} else {
		body, _ = json.Marshal(map[string]any{"error": map[string]string{"type": "auth_error", "message": message}})
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusUnauthorized)
	w.Write(body)
}

// admit is the admission stage of a key: the model must be one it may use (403, before
// queueing), and its request and token budgets must have room (429 with the wait).
func (s *Server) admit(ctx context.Context, k *keys.Key, model string, now time.Time) *relayError {
	if !k.Allows(model) {
		return &relayError{status: http.StatusForbidden, message: "model " + model + " is not allowed for this API key",
			code: "model_not_allowed"}
	}
	if no, ok := s.budget.Admit(ctx, k.ID, k.Limits, now); !ok {
		return &relayError{status: http.StatusTooManyRequests, message: "API key over its " + no.Limit,
			code: "rate_limit_exceeded", wait: no.Wait}
	}
	return nil
}

// allowedChain drops from a fallback chain the models the key may not use: a fallback never
// takes a key where it could not go itself.
func allowedChain(k *keys.Key, chain []string) []string {
	if k == nil || len(k.AllowedModels) == 0 {
		return chain
	}
	var kept []string
	for _, m := range chain {
		if k.Allows(m) {
			kept = append(kept, m)
		}
	}
	return kept
}
