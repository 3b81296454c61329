package keys_test

import (
	"testing"

	"modelrelay/relay/keys"
	"modelrelay/relay/keys/storetest"
)

// TestMemoryStore holds the in-memory store to the contract the PostgreSQL store also meets.
func TestMemoryStore(t *testing.T) {
	storetest.Run(t, func(*testing.T) keys.Store { return keys.NewMemory() })
}
