package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// The request bodies every generator sends: a small chat completion, streamed or not.
const (
	completionRequest = `{"model":"bench","messages":[{"role":"user","content":"hello"}],"stream":false}`
	streamRequest     = `{"model":"bench","messages":[{"role":"user","content":"hello"}],"stream":true}`
	completionPath    = "/v1/chat/completions"
	// holdRequest asks the fake upstream for an idle stream (holdMarker): head, one event, silence.
	holdRequest = `{"model":"bench","messages":[{"role":"user","content":"hello"}],"stream":true,"user":"bench-hold"}`
)

// newTransport keeps up to conns connections per host alive: one per generator loop.
func newTransport(conns int) *http.Transport {
	return &http.Transport{
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     60 * time.Second,
		DisableCompression:  true,
	}
}

// newCompletionRequest is a completion with body to t, with t's Host and headers.
func newCompletionRequest(ctx context.Context, t Target, body string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+t.Addr+completionPath,
		bytes.NewBufferString(body))
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	for name, values := range t.Header {
		req.Header[name] = values
	}
	req.Header.Set("Content-Type", "application/json")
	if t.Host != "" {
		req.Host = t.Host
	}
	return req, nil
}

// oneCompletion sends one non-streaming completion and wants a 200 with the full body.
func oneCompletion(ctx context.Context, t Target) error {
	addr := t.Addr
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := newCompletionRequest(ctx, t, completionRequest)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("completion via %s: %w", addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("completion via %s: read body: %w", addr, err)
	}
	if resp.StatusCode != http.StatusOK || !bytes.Equal(body, completionBody) {
		return fmt.Errorf("completion via %s: status %d, %d bytes", addr, resp.StatusCode, len(body))
	}
	return nil
}
