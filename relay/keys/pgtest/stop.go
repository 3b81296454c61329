package pgtest

import (
	"fmt"
	"os"
	"testing"
)

// Run is Main for a TestMain that has more to do after the tests: it runs them, stops and
// removes the shared cluster if one was started, and returns the exit code instead of
// exiting. Shared works in the package's tests as under Main.
//
//	func TestMain(m *testing.M) {
//		code := pgtest.Run(m)
//		// … the package's own cleanup …
//		os.Exit(code)
//	}
func Run(m *testing.M) int {
	mainRuns.Store(true)
	code := m.Run()
	if err := StopShared(); err != nil {
		fmt.Fprintln(os.Stderr, "pgtest:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// StopShared stops and removes the shared cluster if one was started (nil when none was). It
// is for the end of a TestMain: no test may use Shared afterwards.
func StopShared() error {
	shared.once.Do(func() {}) // orders the read below after a start; no start from here on
	if shared.c == nil {
		return nil
	}
	return shared.c.remove()
}
