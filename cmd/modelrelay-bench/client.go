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
	holdRequest = `{"model":"bench","messages":[{"role":"user","content":"hello"}],"stream":true,"bench_hold":true}`
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

func newCompletionRequest(ctx context.Context, addr, host, body string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+completionPath,
		bytes.NewBufferString(body))
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if host != "" {
		req.Host = host
	}
	return req, nil
}

// oneCompletion sends one non-streaming completion and wants a 200 with the full body.
func oneCompletion(ctx context.Context, addr, host string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := newCompletionRequest(ctx, addr, host, completionRequest)
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
