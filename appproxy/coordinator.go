package appproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"modelrelay/protocol"
)

// maxAnswerBytes bounds what we read from the coordinator; a circuit list of thousands of
// circuits stays far below it.
const maxAnswerBytes = 64 << 20

// Coordinator is the REST client for the coordinator's worker API.
type Coordinator struct {
	base   string
	secret string
	client *http.Client
}

// NewCoordinator checks the URL once so later calls cannot fail on it. A nil client gets one
// with a 10 s timeout: the Worker makes these calls on the goroutine that also applies and acks
// events, so a hung coordinator must not hold an ack past the coordinator's 15 s patience.
func NewCoordinator(baseURL, apiSecret string, client *http.Client) (*Coordinator, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("coordinator_url %q: want http(s)://host[:port]", baseURL)
	}
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	return &Coordinator{base: strings.TrimRight(baseURL, "/"), secret: apiSecret, client: client}, nil
}

// BaseURL is the coordinator URL this client talks to.
func (c *Coordinator) BaseURL() string { return c.base }

// Register is PUT /api/worker; it is idempotent by authority.
func (c *Coordinator) Register(ctx context.Context, reg protocol.WorkerRegistration) (protocol.Worker, error) {
	body, err := c.do(ctx, "register", http.MethodPut, "/api/worker", reg)
	if err != nil {
		return protocol.Worker{}, err
	}
	w, err := protocol.DecodeWorker(body)
	if err != nil {
		return protocol.Worker{}, fmt.Errorf("coordinator register: %w", err)
	}
	return w, nil
}

// Heartbeat is PATCH /api/worker/<id>; a 404 (ErrNotFound) means we must register again.
func (c *Coordinator) Heartbeat(ctx context.Context, workerID string) (protocol.Worker, error) {
	body, err := c.do(ctx, "heartbeat", http.MethodPatch, workerPath(workerID), nil)
	if err != nil {
		return protocol.Worker{}, err
	}
	w, err := protocol.DecodeWorker(body)
	if err != nil {
		return protocol.Worker{}, fmt.Errorf("coordinator heartbeat: %w", err)
	}
	return w, nil
}

// Circuits is GET /api/worker/<id>/circuits: every circuit assigned to us.
func (c *Coordinator) Circuits(ctx context.Context, workerID string) ([]protocol.Circuit, error) {
	body, err := c.do(ctx, "pull circuits", http.MethodGet, workerPath(workerID)+"/circuits", nil)
	if err != nil {
		return nil, err
	}
	cs, err := protocol.DecodeCircuitList(body)
	if err != nil {
		return nil, fmt.Errorf("coordinator pull circuits: %w", err)
	}
	return cs, nil
}

// Deregister is DELETE /api/worker/<id>, on shutdown.
func (c *Coordinator) Deregister(ctx context.Context, workerID string) error {
	_, err := c.do(ctx, "deregister", http.MethodDelete, workerPath(workerID), nil)
	return err
}

func workerPath(id string) string { return "/api/worker/" + url.PathEscape(id) }

// do sends one request with the headers every coordinator call needs; without Accept the
// coordinator may answer HTML.
func (c *Coordinator) do(ctx context.Context, op, method, path string, body any) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("coordinator %s: encode body: %w", op, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, fmt.Errorf("coordinator %s: %w", op, err)
	}
	req.Header.Set("X-BackendAI-Token", c.secret)
	req.Header.Set("X-BackendAI-RequestID", protocol.NewUUID())
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("coordinator %s: %w", op, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return nil, fmt.Errorf("coordinator %s: read answer: %w", op, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, newCoordinatorError(op, resp.StatusCode, answer, c.secret)
	}
	return answer, nil
}
