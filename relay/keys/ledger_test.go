package keys

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func TestLedgerBatchesAndSums(t *testing.T) {
	ctx := context.Background()
	m := NewMemory()
	k, _ := newKey(t, m, Limits{})
	l := NewLedger(m, time.Second, 0, nil)
	at := time.Date(2026, 11, 25, 23, 59, 0, 0, time.UTC)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				l.Add(k.ID, "llama", 10, 5, at)
			}
		})
	}
	wg.Wait()
	l.Add(k.ID, "llama", 1, 1, at.Add(2*time.Minute)) // the next UTC day
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ := m.Usage(ctx, k.ID)
	if len(got) != 2 || got[0].Requests != 800 || got[0].InputTokens != 8000 || got[0].OutputTokens != 4000 ||
		got[1].Requests != 1 || !got[1].Day.Equal(Day(at).AddDate(0, 0, 1)) {
		t.Fatalf("usage = %+v", got)
	}
	if kk, _, _ := m.Get(ctx, k.ID); !kk.LastUsedAt.Equal(at.Add(2 * time.Minute)) {
		t.Fatalf("last used %v", kk.LastUsedAt)
	}
	if l.Pending() != 0 {
		t.Fatalf("pending %d after a flush", l.Pending())
	}
}

func TestLedgerKeepsWhatTheStoreRefuses(t *testing.T) {
	ctx := context.Background()
	f := &flaky{Store: NewMemory()}
	k, _ := newKey(t, f, Limits{})
	l := NewLedger(f, time.Second, 2, nil)
	at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	f.down.Store(true)
	l.Add(k.ID, "a", 1, 2, at)
	if err := l.Flush(ctx); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("flush while down: %v", err)
	}
	l.Add(k.ID, "a", 1, 2, at)
	l.Add(k.ID, "b", 1, 2, at)
	l.Add(k.ID, "c", 1, 2, at) // a third distinct row: over the bound of 2
	l.Add(k.ID, "c", 1, 2, at)
	if l.Pending() != 2 || l.Dropped() != 2 {
		t.Fatalf("pending %d dropped %d, want 2 and 2", l.Pending(), l.Dropped())
	}
	l.Flush(ctx)
	f.down.Store(false)
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ := f.Usage(ctx, k.ID)
	if len(got) != 2 || got[0].Model != "a" || got[0].Requests != 2 || got[0].OutputTokens != 4 || got[1].Model != "b" {
		t.Fatalf("usage after the store came back = %+v", got)
	}
	if l.Failures() != 2 {
		t.Fatalf("failures %d", l.Failures())
	}
}

func TestLedgerRunStopsWithItsContext(t *testing.T) {
	m := NewMemory()
	l := NewLedger(m, 10*time.Millisecond, 0, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { l.Run(ctx); close(done) }()
	l.Add("k", "m", 1, 1, time.Now())
	deadline := time.Now().Add(5 * time.Second)
	for l.Pending() != 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if l.Pending() != 0 {
		t.Fatal("Run never flushed")
	}
	cancel()
	<-done
}
