package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Tools finds the public programs the benchmark compares against and installs missing ones
// from Debian packages. A tool that cannot be had is reported, and its row skipped.
type Tools struct {
	skipInstall bool
	updated     bool
	log         func(format string, args ...any)
}

// Find returns the path of binary, installing package pkg first if needed.
func (t *Tools) Find(binary, pkg string) (string, error) {
	if path := lookPath(binary); path != "" {
		return path, nil
	}
	if t.skipInstall {
		return "", fmt.Errorf("%s not found and -skip-install is set", binary)
	}
	if err := t.install(pkg); err != nil {
		return "", err
	}
	if path := lookPath(binary); path != "" {
		return path, nil
	}
	return "", fmt.Errorf("%s still not found after installing %s", binary, pkg)
}

// lookPath also looks in the sbin directories, which are not on every user's PATH.
func lookPath(binary string) string {
	if path, err := exec.LookPath(binary); err == nil {
		return path
	}
	for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/local/sbin"} {
		path := filepath.Join(dir, binary)
		if st, err := os.Stat(path); err == nil && st.Mode()&0o111 != 0 {
			return path
		}
	}
	return ""
}

func (t *Tools) install(pkg string) error {
	prefix := []string{}
	if os.Geteuid() != 0 {
		if lookPath("sudo") == "" {
			return fmt.Errorf("install %s: not root and no sudo", pkg)
		}
		prefix = []string{"sudo"}
	}
	if !t.updated {
		t.log("apt-get update (once) to install missing tools")
		if out, err := runQuiet(append(prefix, "apt-get", "update", "-qq")...); err != nil {
			return fmt.Errorf("apt-get update: %w: %s", err, lastLine(out))
		}
		t.updated = true
	}
	t.log("installing %s from Debian packages", pkg)
	if out, err := runQuiet(append(prefix, "apt-get", "install", "-y", "-qq", pkg)...); err != nil {
		return fmt.Errorf("apt-get install %s: %w: %s", pkg, err, lastLine(out))
	}
	return nil
}

func runQuiet(argv ...string) (string, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
