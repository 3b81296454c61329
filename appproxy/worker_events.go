package appproxy

import (
	"context"
	"log/slog"

	"modelrelay/protocol"
)

// onSubscribed runs on the subscriber goroutine; a pending signal already means "pull".
func (w *Worker) onSubscribed(context.Context) {
	select {
	case w.subscribed <- struct{}{}:
	default:
	}
}

// onEvent hands events to the Run loop in order; a full queue holds the subscriber back, which
// leaves the backlog in Redis' client buffer rather than dropping it.
func (w *Worker) onEvent(ctx context.Context, ev protocol.Event) {
	select {
	case w.events <- ev:
	case <-ctx.Done():
	}
}

func (w *Worker) handle(ctx context.Context, ev protocol.Event) {
	w.cfg.Metrics.event(eventKind(ev))
	switch e := ev.(type) {
	case *protocol.CircuitCreated:
		if w.ours(e.Authority, ev) {
			w.created(ctx, e)
		}
	case *protocol.CircuitRemoved:
		if !w.ours(e.Authority, ev) {
			return
		}
		ids := make([]string, len(e.Circuits))
		for i, c := range e.Circuits {
			ids[i] = c.ID
		}
		w.touch(ids...)
		if w.store.Remove(ids...) || w.dirty {
			if w.apply(ctx, "removed") == nil {
				w.log.Info("appproxy circuits removed", "circuits", ids)
			}
		}
	case *protocol.CircuitRouteUpdated:
		if !w.ours(e.Authority, ev) {
			return
		}
		if reason := e.Circuit.IgnoreReason(); reason != "" {
			w.log.Info("appproxy ignoring route update", "circuit", e.Circuit.ID, "reason", reason)
			return
		}
		w.touch(e.Circuit.ID)
		if w.store.SetRoutes(e.Circuit, e.Routes) || w.dirty {
			w.apply(ctx, "route update")
		}
	default:
		// Acks (ours and other workers') and other components' events share the channel.
		w.log.Debug("appproxy event ignored", "name", ev.EventName())
	}
}

func (w *Worker) ours(authority string, ev protocol.Event) bool {
	if authority == w.cfg.Registration.Authority {
		return true
	}
	w.log.Debug("appproxy event for another worker", "name", ev.EventName(), "target", authority)
	return false
}

// created applies the circuits and only then acks: the ack tells the coordinator the circuits are
// routable. Repeats are applied and acked again (the coordinator may have missed our ack).
func (w *Worker) created(ctx context.Context, e *protocol.CircuitCreated) {
	serve := w.serveable(e.Circuits, slog.LevelInfo)
	if len(serve) == 0 {
		return // nothing we serve: an ack would claim otherwise
	}
	ids := make([]string, len(serve))
	for i, c := range serve {
		ids[i] = c.ID
	}
	w.touch(ids...)
	w.store.Add(serve...)
	if err := w.apply(ctx, "created"); err != nil {
		return // no ack; the next resync retries the apply
	}
	if w.acker == nil {
		return
	}
	err := w.acker.Ack(ctx, w.cfg.Registration.Authority, e.CircuitsJSON)
	w.cfg.Metrics.ack(err)
	if err != nil {
		w.log.Error("appproxy ack failed", "err", err)
		return
	}
	w.log.Info("appproxy circuits acked", "circuits", len(e.Circuits))
}

// serveable keeps the circuits this relay can address and logs the others at level.
func (w *Worker) serveable(cs []protocol.Circuit, level slog.Level) []protocol.Circuit {
	out := make([]protocol.Circuit, 0, len(cs))
	for _, c := range cs {
		if reason := c.IgnoreReason(); reason != "" {
			w.log.Log(context.Background(), level, "appproxy circuit ignored", "circuit", c.ID, "reason", reason)
			continue
		}
		out = append(out, c)
	}
	return out
}

func eventKind(ev protocol.Event) string {
	switch ev.(type) {
	case *protocol.CircuitCreated:
		return "created"
	case *protocol.CircuitRemoved:
		return "removed"
	case *protocol.CircuitRouteUpdated:
		return "route_updated"
	}
	return "other"
}
