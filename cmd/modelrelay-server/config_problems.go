package main

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// problems collects everything wrong with one load (unset variables in the file, values that
// do not decode, values that do not validate) so that one start-up names every bad key instead
// of one per attempt. They are reported in the order of the settings table (the order of
// --help), then appproxy, backends and fallbacks; problems of one section keep the order of
// the checks, which never varies.
type problems struct {
	list []problem
	bad  map[string]bool
}

type problem struct{ key, msg string }

// add records a problem with key unless key already has one: a value that did not decode is
// left at its zero value, and validating that zero would only repeat the first complaint.
func (p *problems) add(key, format string, args ...any) {
	if p.bad == nil {
		p.bad = map[string]bool{}
	}
	if p.bad[key] {
		return
	}
	p.bad[key] = true
	p.list = append(p.list, problem{key: key, msg: fmt.Sprintf(format, args...)})
}

// err is nil when nothing was found.
func (p *problems) err() error {
	if len(p.list) == 0 {
		return nil
	}
	list := slices.Clone(p.list)
	slices.SortStableFunc(list, func(a, b problem) int { return cmp.Compare(keyRank(a.key), keyRank(b.key)) })
	return configError(list)
}

// keyRank places a key's top-level name ("appproxy" for appproxy.api_secret, "backends" for
// backends[1].url) in the settings table, then among the file-only sections.
func keyRank(key string) int {
	if i := slices.IndexFunc(settings, func(s setting) bool { return s.key == key }); i >= 0 {
		return i // a setting of a section (cache.ttl)
	}
	if i := strings.IndexAny(key, ".["); i >= 0 {
		key = key[:i]
	}
	if i := slices.IndexFunc(settings, func(s setting) bool { return s.key == key || strings.HasPrefix(s.key, key+".") }); i >= 0 {
		return i
	}
	if i := slices.Index(fileOnlyKeys, key); i >= 0 {
		return len(settings) + i
	}
	return len(settings) + len(fileOnlyKeys)
}

// configError is every problem of one load, one line each ("config: <key>: <what>"), so the
// operator fixes them all in one go.
type configError []problem

func (e configError) Error() string {
	lines := make([]string, len(e))
	for i, p := range e {
		lines[i] = "config: " + p.key + ": " + strings.NewReplacer("\r", " ", "\n", " ").Replace(p.msg)
	}
	return strings.Join(lines, "\n")
}
