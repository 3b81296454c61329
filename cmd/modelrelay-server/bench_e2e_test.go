package main

// Time from PUBLISH of a created event to its ack, and to the first successful request through
// the new circuit (target: ack under 50 ms at the median).

import (
	"context"
	"slices"
	"testing"
	"time"

	"modelrelay/protocol"
)

func BenchmarkE2ECreatedToAckAndFirstRequest(b *testing.B) {
	// "suite" uses the e2e timings (resync every 300 ms, heartbeat every 200 ms); "quiet" the
	// stock ones, which shows what the periodic pull costs the ack path.
	b.Run("suite", func(b *testing.B) { benchCreatedToAck(b, nil) })
	b.Run("quiet", func(b *testing.B) {
		benchCreatedToAck(b, map[string]string{"APPPROXY_RECONCILE_INTERVAL": "15s", "APPPROXY_HEARTBEAT_PERIOD": "10s"})
	})
}

func benchCreatedToAck(b *testing.B, env map[string]string) {
	e := startE2E(b, e2eOptions{env: env})
	rep := newReplica(b, "r", "m")
	ctx := context.Background()
	w, err := e.coord.WatchAcks(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	var toAck, toServe []time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		c := newCircuit("bench-"+itoa(i), route{port: rep.port()})
		c.public = true
		if _, err := e.coord.AddCircuit(e.authority, c.json()); err != nil {
			b.Fatal(err)
		}
		msg, err := protocol.EncodeCircuitEvent(protocol.EventCircuitCreated, e.authority, "["+string(c.json())+"]", protocol.FormatArgs)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		if err := e.coord.Publish(ctx, msg); err != nil {
			b.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		_, err = w.Wait(wctx, c.id)
		cancel()
		if err != nil {
			b.Fatalf("circuit %d: %v", i, err)
		}
		toAck = append(toAck, time.Since(start))
		for {
			st, _, _ := e.chat(circuitHost(c.subdomain), "m", nil)
			if st == 200 {
				break
			}
			if time.Since(start) > 15*time.Second {
				b.Fatalf("circuit %d never served (last %d)", i, st)
			}
		}
		toServe = append(toServe, time.Since(start))
	}
	b.StopTimer()
	b.ReportMetric(ms(median(toAck)), "ack-ms/median")
	b.ReportMetric(ms(median(toServe)), "first-ok-ms/median")
	b.ReportMetric(ms(slices.Max(toAck)), "ack-ms/max")
	b.ReportMetric(0, "ns/op") // the per-op time mixes both phases; the metrics above are the point
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
