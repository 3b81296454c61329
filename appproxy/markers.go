package appproxy

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Marker lifetimes the coordinator's statistics expect: a circuit's and a session's last
// access are kept two days, a circuit's request count an hour.
const (
	lastAccessTTL   = 48 * time.Hour
	requestCountTTL = time.Hour
	// LiveDB is the Redis database of the coordinator's "live" role, where markers go.
	LiveDB = 2
)

// Markers batches last-used markers off the request path: MarkUsed only bumps counters in
// memory, and Run writes them to Redis in one pipeline per period.
type Markers struct {
	client *redis.Client // on LiveDB
	period time.Duration
	logger *slog.Logger

	mu       sync.Mutex
	circuits map[string]int64 // requests since the last flush
	sessions map[string]struct{}
}

// NewMarkers writes through client, which must select LiveDB. period defaults to 5 s.
func NewMarkers(client *redis.Client, period time.Duration, logger *slog.Logger) *Markers {
	if period <= 0 {
		period = 5 * time.Second
	}
	if logger == nil {
		logger = slog.Default()
	}
	return &Markers{client: client, period: period, logger: logger,
		circuits: map[string]int64{}, sessions: map[string]struct{}{}}
}

// MarkUsed records one request served by the replica of sessionID ("" if unknown) in circuitID.
// It never blocks on Redis.
func (m *Markers) MarkUsed(circuitID, sessionID string) {
	if circuitID == "" {
		return
	}
	m.mu.Lock()
	m.circuits[circuitID]++
	if sessionID != "" {
		m.sessions[sessionID] = struct{}{}
	}
	m.mu.Unlock()
}

// Run flushes every period until ctx is done, then once more so a clean shutdown loses nothing.
func (m *Markers) Run(ctx context.Context) {
	t := time.NewTicker(m.period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			final, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			m.flushAndLog(final)
			cancel()
			return
		case <-t.C:
			m.flushAndLog(ctx)
		}
	}
}

func (m *Markers) flushAndLog(ctx context.Context) {
	if err := m.Flush(ctx); err != nil {
		// The markers only feed statistics; a lost batch is not worth a retry queue.
		m.logger.Warn("appproxy last-used markers dropped", "err", err)
	}
}

// Flush writes and clears the pending batch.
func (m *Markers) Flush(ctx context.Context) error {
	m.mu.Lock()
	circuits, sessions := m.circuits, m.sessions
	if len(circuits) == 0 && len(sessions) == 0 {
		m.mu.Unlock()
		return nil
	}
	m.circuits, m.sessions = map[string]int64{}, map[string]struct{}{}
	m.mu.Unlock()

	// The coordinator reads a Python float text of unix seconds.
	now := strconv.FormatFloat(float64(time.Now().UnixMicro())/1e6, 'f', 6, 64)
	pipe := m.client.Pipeline()
	for id, n := range circuits {
		pipe.Set(ctx, "circuit."+id+".last_access", now, lastAccessTTL)
		pipe.IncrBy(ctx, "circuit."+id+".requests", n)
		pipe.Expire(ctx, "circuit."+id+".requests", requestCountTTL)
	}
	for id := range sessions {
		pipe.Set(ctx, "session."+id+".last_access", now, lastAccessTTL)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("write last-used markers: %w", err)
	}
	return nil
}
