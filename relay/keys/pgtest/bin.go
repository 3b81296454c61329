package pgtest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// binaries are the server programs a cluster needs.
type binaries struct {
	initdb, pgCtl, postgres string
}

// errNoServer is the one-line reason a test fails on a machine without PostgreSQL.
var errNoServer = errors.New("PostgreSQL server binaries (initdb, pg_ctl, postgres) not found " +
	"under /usr/lib/postgresql/*/bin or in PATH: run `make deps` (installs the Debian package postgresql)")

// findBinaries prefers the newest Debian-packaged version (/usr/lib/postgresql/N/bin, which is
// not in PATH), then PATH.
func findBinaries() (binaries, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return compareVersions(versionOf(b), versionOf(a)) })
	for _, dir := range dirs {
		b := binaries{filepath.Join(dir, "initdb"), filepath.Join(dir, "pg_ctl"), filepath.Join(dir, "postgres")}
		if executable(b.initdb) && executable(b.pgCtl) && executable(b.postgres) {
			return b, nil
		}
	}
	var b binaries
	for _, p := range []struct {
		name string
		dst  *string
	}{{"initdb", &b.initdb}, {"pg_ctl", &b.pgCtl}, {"postgres", &b.postgres}} {
		path, err := exec.LookPath(p.name)
		if err != nil {
			return binaries{}, errNoServer
		}
		*p.dst = path
	}
	return b, nil
}

// versionOf returns the numeric parts of the version directory in .../postgresql/15/bin.
func versionOf(binDir string) []int {
	var v []int
	for _, part := range strings.Split(filepath.Base(filepath.Dir(binDir)), ".") {
		n, err := strconv.Atoi(part)
		if err != nil {
			return nil
		}
		v = append(v, n)
	}
	return v
}

func compareVersions(a, b []int) int { return slices.Compare(a, b) }

func executable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// serverUser is who runs the server programs: PostgreSQL refuses to run as root, so a root
// test process runs them as the user postgres (or nobody when there is none). nil: as we are.
type serverUser struct {
	uid, gid uint32
	name     string
}

func lookupServerUser() (*serverUser, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	var lastErr error
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			lastErr = err
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("user %s: %w", name, err)
		}
		return &serverUser{uid: uint32(uid), gid: uint32(gid), name: name}, nil
	}
	return nil, fmt.Errorf("running as root and no unprivileged user (postgres, nobody) to run PostgreSQL as: %w", lastErr)
}

// command returns a command that runs as u (when set) in dir, which u must be able to enter.
func (u *serverUser) command(dir, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	// Our own settings only: a PGPORT or PGDATA from the developer's shell must not steer pg_ctl.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") && !strings.HasPrefix(kv, "LC_") && !strings.HasPrefix(kv, "LANG") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "LC_ALL=C")
	if u != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.uid, Gid: u.gid}}
	}
	return cmd
}

// chown gives path to u (when set).
func (u *serverUser) chown(path string) error {
	if u == nil {
		return nil
	}
	return os.Chown(path, int(u.uid), int(u.gid))
}
