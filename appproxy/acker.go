package appproxy

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"modelrelay/protocol"
)

// Acker publishes the worker's circuit-added acks; the coordinator waits up to 15 s for one
// before it tells the manager the worker is not responding.
type Acker struct {
	Client  *redis.Client
	Channel string // default protocol.EventsChannel
}

// Ack confirms that the circuits of a created event are routable. circuitsJSON must be the
// event's circuits text exactly as received.
func (a *Acker) Ack(ctx context.Context, authority, circuitsJSON string) error {
	msg, err := protocol.EncodeAck(authority, circuitsJSON)
	if err != nil {
		return err
	}
	channel := a.Channel
	if channel == "" {
		channel = protocol.EventsChannel
	}
	if err := a.Client.Publish(ctx, channel, msg).Err(); err != nil {
		return fmt.Errorf("publish ack: %w", err)
	}
	return nil
}
