package appproxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"modelrelay/protocol"
)

// defaultIdleProbe is how long the subscription may stay silent before we ping it: a peer that
// vanished without closing the socket would otherwise leave us subscribed to nothing, forever.
const defaultIdleProbe = 30 * time.Second

// Subscriber keeps a Pub/Sub subscription to the coordinator's event channel alive and hands each
// decoded event on, in arrival order.
type Subscriber struct {
	Client  *redis.Client
	Channel string // default protocol.EventsChannel
	// OnSubscribed runs after every (re)subscribe. Pub/Sub drops whatever was published while we
	// were not subscribed, so the caller pulls the full circuit set then. It must not block long.
	OnSubscribed func(ctx context.Context)
	// OnEvent receives every well-formed event, unknown names included.
	OnEvent func(ctx context.Context, ev protocol.Event)
	Logger  *slog.Logger
	// MinBackoff and MaxBackoff default to 1 s and 30 s.
	MinBackoff, MaxBackoff time.Duration
	// IdleProbe is the silence after which the connection is pinged; no answer within another
	// IdleProbe means it is dead. Default 30 s.
	IdleProbe time.Duration
	Metrics   *Metrics // nil counts nothing

	connected atomic.Bool
}

// Connected reports whether the subscription is currently confirmed.
func (s *Subscriber) Connected() bool { return s.connected.Load() }

// Run subscribes and resubscribes with backoff until ctx is done.
func (s *Subscriber) Run(ctx context.Context) {
	bo := newBackoff(s.MinBackoff, s.MaxBackoff)
	for {
		established, err := s.session(ctx)
		s.connected.Store(false)
		if ctx.Err() != nil {
			return
		}
		if established {
			bo.Reset()
		}
		delay := bo.Next()
		s.logger().Warn("appproxy events subscription lost; resubscribing", "err", err, "retry_in", delay)
		if !sleep(ctx, delay) {
			return
		}
	}
}

// session runs one subscription until it fails. established says whether it was confirmed, so a
// long healthy session restarts the backoff.
func (s *Subscriber) session(ctx context.Context) (established bool, err error) {
	ps := s.Client.Subscribe(ctx)
	defer ps.Close()
	// Receive does not watch ctx; closing the subscription is what unblocks it.
	stop := context.AfterFunc(ctx, func() { _ = ps.Close() })
	defer stop()

	channel := s.channel()
	if err := ps.Subscribe(ctx, channel); err != nil {
		return false, fmt.Errorf("subscribe %s: %w", channel, err)
	}
	msg, err := ps.ReceiveTimeout(ctx, s.idleProbe())
	if err != nil {
		return false, fmt.Errorf("subscribe %s: %w", channel, err)
	}
	if sub, ok := msg.(*redis.Subscription); !ok || sub.Kind != "subscribe" {
		return false, fmt.Errorf("subscribe %s: unexpected confirmation %v", channel, msg)
	}
	s.connected.Store(true)
	s.logger().Info("appproxy events subscribed", "channel", channel)
	if s.OnSubscribed != nil {
		s.OnSubscribed(ctx)
	}
	return true, s.receive(ctx, ps)
}

func (s *Subscriber) receive(ctx context.Context, ps *redis.PubSub) error {
	pinged := false
	for {
		msg, err := ps.ReceiveTimeout(ctx, s.idleProbe())
		if err != nil {
			if !isTimeout(err) || pinged {
				return fmt.Errorf("receive: %w", err)
			}
			if err := ps.Ping(ctx); err != nil {
				return fmt.Errorf("ping: %w", err)
			}
			pinged = true
			continue
		}
		pinged = false
		if m, ok := msg.(*redis.Message); ok {
			s.deliver(ctx, []byte(m.Payload))
		}
	}
}

// deliver decodes one message. The channel is shared with other Backend.AI components and open to
// anyone who can reach Redis, so bad input is logged (briefly) and skipped.
func (s *Subscriber) deliver(ctx context.Context, data []byte) {
	ev, err := protocol.DecodeEvent(data)
	if err != nil {
		s.Metrics.event("malformed")
		s.logger().Warn("appproxy events: skipping malformed message",
			"bytes", len(data), "head", snippet(data), "err", oneLine(err.Error(), ""))
		return
	}
	if s.OnEvent != nil {
		s.OnEvent(ctx, ev)
	}
}

func (s *Subscriber) channel() string {
	if s.Channel == "" {
		return protocol.EventsChannel
	}
	return s.Channel
}

func (s *Subscriber) idleProbe() time.Duration {
	if s.IdleProbe <= 0 {
		return defaultIdleProbe
	}
	return s.IdleProbe
}

func (s *Subscriber) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.Default()
	}
	return s.Logger
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// snippet is the start of a message for a log line.
func snippet(b []byte) string {
	const n = 96
	if len(b) > n {
		return fmt.Sprintf("%q…", b[:n])
	}
	return fmt.Sprintf("%q", b)
}
