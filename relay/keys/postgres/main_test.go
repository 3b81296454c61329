package postgres_test

import (
	"testing"

	"modelrelay/relay/keys/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }
