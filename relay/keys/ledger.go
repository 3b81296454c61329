package keys

import (
	"context"
	"hash/maphash"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Ledger collects what keys used (requests and tokens per key, model and UTC day, and each
// key's last use) and writes it to the store in batches, off the request path. A batch the
// store refuses is kept and tried again with the next; what waits is bounded by maxRows
// distinct rows, past which new rows are dropped and counted (Dropped).
type Ledger struct {
	store    Store
	interval time.Duration
	maxRows  int
	log      *slog.Logger

	shards [ledgerShards]ledgerShard
	seed   maphash.Seed
	rows   atomic.Int64 // distinct rows pending, across shards
	flush  sync.Mutex   // one flush at a time

	dropped  atomic.Int64 // requests whose usage was dropped
	failures atomic.Int64 // batches the store refused
}

// ledgerShards spreads Add over several locks: requests of different keys never wait on one
// another.
const ledgerShards = 16

type ledgerShard struct {
	mu   sync.Mutex
	rows map[usageRow]*Usage
	used map[string]time.Time
}

// NewLedger returns a ledger writing to store every interval (at most a second), holding at
// most maxRows distinct rows while the store is down.
func NewLedger(store Store, interval time.Duration, maxRows int, log *slog.Logger) *Ledger {
	if interval <= 0 || interval > time.Second {
		interval = time.Second
	}
	if maxRows <= 0 {
		maxRows = 100_000
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &Ledger{store: store, interval: interval, maxRows: maxRows, log: log, seed: maphash.MakeSeed()}
	for i := range l.shards {
		l.shards[i].rows = map[usageRow]*Usage{}
		l.shards[i].used = map[string]time.Time{}
	}
	return l
}

// Add records one request of key id on model at time at, with the tokens it used.
func (l *Ledger) Add(id, model string, input, output int64, at time.Time) {
	l.add(Usage{KeyID: id, Day: Day(at), Model: model, Requests: 1, InputTokens: input, OutputTokens: output}, at)
}

func (l *Ledger) add(u Usage, at time.Time) {
	sh := &l.shards[maphash.String(l.seed, u.KeyID)%ledgerShards]
	id := usageRow{u.KeyID, u.Model, u.Day}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if !at.IsZero() && at.After(sh.used[u.KeyID]) {
		sh.used[u.KeyID] = at
	}
	t, ok := sh.rows[id]
	if !ok {
		if l.rows.Add(1) > int64(l.maxRows) {
			l.rows.Add(-1)
			l.dropped.Add(u.Requests)
			return
		}
		t = &Usage{KeyID: u.KeyID, Day: u.Day, Model: u.Model}
		sh.rows[id] = t
	}
	t.Requests += u.Requests
	t.InputTokens += u.InputTokens
	t.OutputTokens += u.OutputTokens
}

// Flush writes what is pending. On failure the batch goes back to wait for the next flush.
func (l *Ledger) Flush(ctx context.Context) error {
	l.flush.Lock()
	defer l.flush.Unlock()
	var rows []Usage
	used := map[string]time.Time{}
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		for _, u := range sh.rows {
			rows = append(rows, *u)
		}
		for id, at := range sh.used {
			used[id] = at
		}
		if len(sh.rows) > 0 || len(sh.used) > 0 {
			l.rows.Add(-int64(len(sh.rows)))
			sh.rows, sh.used = map[usageRow]*Usage{}, map[string]time.Time{}
		}
		sh.mu.Unlock()
	}
	if len(rows) == 0 && len(used) == 0 {
		return nil
	}
	err := l.store.Record(ctx, rows, used)
	if err == nil {
		return nil
	}
	l.failures.Add(1)
	for _, u := range rows {
		l.add(u, time.Time{})
	}
	for id, at := range used {
		l.Touch(id, at)
	}
	return err
}

// Touch records a key's use without a usage row (its last_used_at).
func (l *Ledger) Touch(id string, at time.Time) {
	sh := &l.shards[maphash.String(l.seed, id)%ledgerShards]
	sh.mu.Lock()
	if at.After(sh.used[id]) {
		sh.used[id] = at
	}
	sh.mu.Unlock()
}

// Run flushes every interval until ctx ends. The final flush is the caller's (Flush during
// the drain), so nothing is lost on SIGTERM.
func (l *Ledger) Run(ctx context.Context) {
	t := time.NewTicker(l.interval)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := l.Flush(ctx)
		switch {
		case err != nil && !failing && ctx.Err() == nil:
			l.log.Warn("usage not written; kept to retry", "err", err, "pending_rows", l.Pending())
		case err == nil && failing:
			l.log.Info("usage written again", "pending_rows", l.Pending())
		}
		failing = err != nil
	}
}

// Pending is how many distinct rows wait to be written.
func (l *Ledger) Pending() int64 { return l.rows.Load() }

// Dropped is how many requests' usage was dropped because too much was waiting.
func (l *Ledger) Dropped() int64 { return l.dropped.Load() }

// Failures is how many batches the store refused.
func (l *Ledger) Failures() int64 { return l.failures.Load() }
