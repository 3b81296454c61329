package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"modelrelay/protocol"
)

// Through the real binary: the first heartbeat follows register and pull at once, and with
// the coordinator answering heartbeats and pulls 8 s late, created events are still acked
// within 100 ms and removals applied at once.
func TestE2ESlowCoordinatorRESTDelaysNoAck(t *testing.T) {
	e, _ := startBinaryEnv(t, map[string]string{"APPPROXY_HEARTBEAT_PERIOD": "1h"})
	// The server is ready once it pulled its circuits; the heartbeat that follows may still be
	// on its way on a loaded machine, so wait for the third call before reading the order.
	var order []string
	eventually(t, 5*time.Second, "three coordinator calls", func() (bool, string) {
		order = order[:0]
		for _, r := range e.coord.Requests() {
			order = append(order, r.Method)
		}
		return len(order) >= 3, strings.Join(order, " ")
	})
	if order[0] != http.MethodPut || order[1] != http.MethodGet || order[2] != http.MethodPatch {
		t.Fatalf("coordinator calls %v; want PUT, GET, then PATCH at once", order)
	}

	e.coord.Delay(http.MethodPatch, 8*time.Second)
	e.coord.Delay(http.MethodGet, 8*time.Second)
	defer e.coord.Delay(http.MethodPatch, 0)
	defer e.coord.Delay(http.MethodGet, 0)
	rep := newReplica(t, "r", "m")
	for i := range 6 {
		c := newCircuit("slow"+itoa(i), route{port: rep.port()})
		c.public = true
		start := time.Now()
		if _, err := e.coord.CreateCircuit(context.Background(), e.authority, c.json(), protocol.FormatArgs); err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
		if took := time.Since(start); took > 100*time.Millisecond {
			t.Errorf("circuit %d acked after %s, want within 100 ms", i, took)
		}
		if i == 0 {
			if err := e.coord.RemoveCircuit(context.Background(), e.authority, c.id, protocol.FormatArgs); err != nil {
				t.Fatal(err)
			}
			e.coord.DropCircuit(e.authority, c.id)
			eventually(t, 2*time.Second, "removed circuit gone", func() (bool, string) {
				st, _, body := e.chat(circuitHost("slow0"), "m", nil)
				return st == http.StatusBadRequest, string(body)
			})
		}
	}
}
