// Package postgres is the keys.Store on PostgreSQL, on the Rust ModelRelay server's
// server_api_keys table unchanged (a Rust deployment's database works as it is) plus two tables
// of ours for per-key limits and usage, which a Rust server ignores.
package postgres

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"modelrelay/relay/keys"
)

// Options tune a Store.
type Options struct {
	// Timeout bounds each call (and each step of Open), so a database that hangs costs a
	// request this much and no more; default 2s.
	Timeout time.Duration
}

// migrateTimeout bounds Open's migrations, which may wait for another process's.
const migrateTimeout = 30 * time.Second

// Store is the PostgreSQL key store. It is safe for concurrent use.
type Store struct {
	pool     *pgxpool.Pool
	timeout  time.Duration
	password string // of the URL, kept out of every error text
}

var _ keys.Store = (*Store)(nil)

// Open connects to the database at url (pgxpool's URL or key=value form, so settings such as
// pool_max_conns work), checks that it answers and applies the migrations it lacks. Its errors
// are one line, name the database as host:port/name and never contain the password.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Second
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: invalid database URL: %s", redactURL(err.Error(), url))
	}
	if cfg.ConnConfig.ConnectTimeout <= 0 {
		cfg.ConnConfig.ConnectTimeout = opts.Timeout
	}
	s := &Store{timeout: opts.Timeout, password: cfg.ConnConfig.Password}
	where := target(cfg)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %s: %s", where, s.clean(err))
	}
	s.pool = pool
	pctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	err = pool.Ping(pctx)
	cancel()
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: cannot connect to %s: %s", where, s.clean(err))
	}
	mctx, cancel := context.WithTimeout(ctx, max(migrateTimeout, opts.Timeout))
	defer cancel()
	if err := pgx.BeginFunc(mctx, pool, func(tx pgx.Tx) error { return migrate(mctx, tx) }); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: migrate %s: %s", where, s.clean(err))
	}
	return s, nil
}

// Close closes the pool's connections.
func (s *Store) Close() { s.pool.Close() }

// target names the database for errors: host:port/name, nothing of the credentials.
func target(cfg *pgxpool.Config) string {
	c := cfg.ConnConfig
	return net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port))) + "/" + c.Database
}

// fail wraps a database error as keys.ErrUnavailable, which is how callers tell an outage from
// an answer.
func (s *Store) fail(what string, err error) error {
	return fmt.Errorf("%w: %s: %s", keys.ErrUnavailable, what, s.clean(err))
}

// clean is err's text on one line with the password masked: pgx's messages are careful, but
// nothing it wraps (a dial error, a server message) gets a chance to leak the password.
func (s *Store) clean(err error) string {
	return oneLine(mask(err.Error(), s.password))
}

func mask(text, secret string) string {
	if secret == "" {
		return text
	}
	return strings.ReplaceAll(text, secret, "xxxxx")
}

// oneLine joins text's lines, each once: pgx lists one line per connection attempt, and the
// attempts (with TLS, without) usually failed alike.
func oneLine(text string) string {
	var lines []string
	for _, l := range strings.Split(text, "\n") {
		if l = strings.Join(strings.Fields(l), " "); l != "" && !slices.Contains(lines, l) {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, " ")
}

var (
	quoted   = regexp.MustCompile("`[^`]*`")
	kvPass   = regexp.MustCompile(`(?i)password\s*=\s*('(?:[^'\\]|\\.)*'|[^\s&]+)(\S*)`)
	userInfo = regexp.MustCompile(`://[^/@]*?:([^/]*)@`)
)

// redactURL cleans a parse error of rawURL, which may be malformed: pgx quotes the connection
// string in backquotes (masked on its side, best effort); we drop the quote and mask every
// password we can find in rawURL wherever it appears.
func redactURL(text, rawURL string) string {
	text = quoted.ReplaceAllString(text, "the URL")
	var secrets []string
	if u, err := url.Parse(rawURL); err == nil {
		if p, ok := u.User.Password(); ok {
			secrets = append(secrets, p)
		}
		for k, vs := range u.Query() {
			if strings.Contains(strings.ToLower(k), "password") {
				secrets = append(secrets, vs...)
			}
		}
	}
	for _, m := range userInfo.FindAllStringSubmatch(rawURL, -1) {
		secrets = append(secrets, m[1])
	}
	for _, m := range kvPass.FindAllStringSubmatch(rawURL, -1) {
		secrets = append(secrets, m[1]+m[2], m[1], strings.Trim(m[1], "'"))
	}
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) }) // longest first
	for _, p := range secrets {
		text = mask(text, p)
	}
	return oneLine(text)
}
