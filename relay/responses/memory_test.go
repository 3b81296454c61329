package responses

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

func record(n int) *Record {
	return &Record{Owner: "key:k", Response: json.RawMessage(fmt.Sprintf(`{"pad":"%0*d"}`, n, 0)), Items: json.RawMessage(`[]`)}
}

func TestMemoryKeepsForTTL(t *testing.T) {
	ctx := context.Background()
	m := NewMemory(time.Minute, 1<<20)
	now := time.Unix(1000, 0)
	m.now = func() time.Time { return now }
	if err := m.Put(ctx, "a", record(10)); err != nil {
		t.Fatal(err)
	}
	if r, ok, err := m.Get(ctx, "a"); !ok || err != nil || r.Owner != "key:k" {
		t.Fatalf("Get after Put: %v %v %v", r, ok, err)
	}
	now = now.Add(time.Minute)
	if _, ok, _ := m.Get(ctx, "a"); ok {
		t.Error("a record outlived its TTL")
	}
	if m.records.Bytes() != 0 || m.records.Len() != 0 {
		t.Errorf("an expired record still counts: %d bytes, %d records", m.records.Bytes(), m.records.Len())
	}
}

// The bound holds: the oldest records go first, and a record larger than the bound is not kept.
func TestMemoryBoundedOldestFirst(t *testing.T) {
	ctx := context.Background()
	one := record(100).size()
	m := NewMemory(time.Hour, 3*one)
	for i := range 5 {
		m.Put(ctx, fmt.Sprint(i), record(100))
		if m.records.Bytes() > 3*one {
			t.Fatalf("after %d records: %d bytes held, bound %d", i+1, m.records.Bytes(), 3*one)
		}
	}
	for i, want := range []bool{false, false, true, true, true} {
		if _, ok, _ := m.Get(ctx, fmt.Sprint(i)); ok != want {
			t.Errorf("record %d kept %v, want %v", i, ok, want)
		}
	}
	m.Put(ctx, "huge", record(int(4*one)))
	if _, ok, _ := m.Get(ctx, "huge"); ok {
		t.Error("a record larger than the bound was kept")
	}
	if _, ok, _ := m.Get(ctx, "4"); !ok {
		t.Error("a record too large to keep pushed the others out")
	}
}

func TestMemoryDeleteAndReplace(t *testing.T) {
	ctx := context.Background()
	m := NewMemory(time.Hour, 1<<20)
	m.Put(ctx, "a", record(10))
	m.Put(ctx, "a", record(20))
	if m.records.Len() != 1 || m.records.Bytes() != record(20).size() {
		t.Errorf("a replaced record counts twice: %d records, %d bytes", m.records.Len(), m.records.Bytes())
	}
	if ok, _ := m.Delete(ctx, "a"); !ok {
		t.Error("Delete of a kept record said it was not there")
	}
	if ok, _ := m.Delete(ctx, "a"); ok {
		t.Error("Delete of a deleted record said it was there")
	}
	if m.records.Bytes() != 0 {
		t.Errorf("%d bytes held after the last Delete", m.records.Bytes())
	}
}
