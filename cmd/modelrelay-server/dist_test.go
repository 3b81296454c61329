package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestVersionStamp builds both binaries the way `make dist` and deploy/Dockerfile do and checks
// that --version prints what was stamped, in one format for both. -X silently does nothing when
// the variable it names is missing or initialised from a non-constant, so only a real build
// shows that the stamp reaches the output.
func TestVersionStamp(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two binaries")
	}
	makefile, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	for _, flag := range []string{"-X main.version=$(VERSION)", "-X main.commit=$(COMMIT)"} {
		if !strings.Contains(string(makefile), flag) {
			t.Errorf("Makefile's LDFLAGS do not set %q", flag)
		}
	}

	dir := t.TempDir()
	build := exec.Command("go", "build", "-trimpath",
		"-ldflags", "-s -w -X main.version=v9.9.9 -X main.commit=abc123",
		"-o", dir+string(filepath.Separator), "modelrelay/cmd/modelrelay-server", "modelrelay/cmd/modelrelay-worker")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, name := range []string{"modelrelay-server", "modelrelay-worker"} {
		out, err := exec.Command(filepath.Join(dir, name), "--version").Output()
		if err != nil {
			t.Fatalf("%s --version: %v", name, err)
		}
		if want := name + " v9.9.9 (abc123)\n"; string(out) != want {
			t.Errorf("%s --version printed %q, want %q", name, out, want)
		}
	}
}

// TestVersionUnstamped: `go run` and `go test` builds say so instead of claiming a release.
func TestVersionUnstamped(t *testing.T) {
	var stdout, stderr strings.Builder
	if code := run([]string{"--version"}, func(string) string { return "" }, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
	if want := "modelrelay-server dev (unknown)\n"; stdout.String() != want {
		t.Errorf("--version printed %q, want %q", stdout.String(), want)
	}
}
