package appproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Kinds of coordinator failure the lifecycle acts on differently.
var (
	// ErrConfig: the coordinator rejected who we are or what we sent (bad api_secret, a body it
	// refuses). Retrying cannot help; the operator must fix the configuration.
	ErrConfig = errors.New("coordinator rejected the configuration")
	// ErrNotFound: the coordinator forgot our worker id; register again.
	ErrNotFound = errors.New("coordinator does not know this worker")
)

// CoordinatorError is a non-2xx answer, reduced to one readable line. It never holds the
// api_secret: the coordinator's text is scrubbed of it before it is kept.
type CoordinatorError struct {
	Op        string // register, heartbeat, pull circuits, deregister
	Status    int
	Type      string
	Title     string
	Msg       string
	ErrorCode string
}

func (e *CoordinatorError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "coordinator %s: HTTP %d", e.Op, e.Status)
	if e.Title != "" {
		b.WriteString(": " + e.Title)
	}
	if e.Msg != "" && e.Msg != e.Title {
		b.WriteString(": " + e.Msg)
	}
	if e.ErrorCode != "" {
		b.WriteString(" (error_code " + e.ErrorCode + ")")
	}
	return b.String()
}

// Is lets callers test errors.Is(err, ErrConfig) and errors.Is(err, ErrNotFound).
func (e *CoordinatorError) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.Status == http.StatusNotFound
	case ErrConfig:
		return e.Status >= 400 && e.Status < 500 && !transientClientStatus(e.Status)
	}
	return false
}

// transientClientStatus lists the 4xx answers that are not about our configuration.
func transientClientStatus(status int) bool {
	return status == http.StatusNotFound || status == http.StatusRequestTimeout || status == http.StatusTooManyRequests
}

// Retryable reports whether trying again later may succeed: connection failures, timeouts,
// undecodable answers and 5xx/408/429. Cancellation of our own context is not retryable.
func Retryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var ce *CoordinatorError
	if errors.As(err, &ce) {
		return ce.Status >= 500 || ce.Status == http.StatusRequestTimeout || ce.Status == http.StatusTooManyRequests
	}
	return true
}

// problem is the coordinator's problem JSON.
type problem struct {
	Type      string `json:"type"`
	Title     string `json:"title"`
	Msg       any    `json:"msg"`
	ErrorCode any    `json:"error_code"`
}

// newCoordinatorError builds the error from an answer body that may be problem JSON, HTML from a
// proxy, or nothing.
func newCoordinatorError(op string, status int, body []byte, secret string) *CoordinatorError {
	e := &CoordinatorError{Op: op, Status: status}
	var p problem
	if json.Unmarshal(body, &p) == nil && (p.Title != "" || p.Type != "" || p.Msg != nil) {
		e.Type, e.Title = oneLine(p.Type, secret), oneLine(p.Title, secret)
		e.Msg, e.ErrorCode = oneLine(textOf(p.Msg), secret), oneLine(textOf(p.ErrorCode), secret)
		return e
	}
	e.Title = http.StatusText(status)
	e.Msg = oneLine(string(body), secret)
	return e
}

func textOf(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// oneLine keeps log lines and exit messages to one short line without the secret.
func oneLine(s, secret string) string {
	if secret != "" {
		s = strings.ReplaceAll(s, secret, "[redacted]")
	}
	s = strings.Join(strings.Fields(s), " ")
	const limit = 200
	if len(s) > limit {
		s = strings.ToValidUTF8(s[:limit], "") + "…"
	}
	return s
}
