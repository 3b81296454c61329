package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/knadh/koanf/parsers/toml/v2"
	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/rawbytes"
	"github.com/knadh/koanf/v2"
)

// readConfigFile parses the file (TOML for *.toml, YAML otherwise), expands ${ENV_VAR} in
// values, drops nulls (an empty value means "use the default") and reports unknown keys.
func readConfigFile(path string, getenv func(string) string) (map[string]any, []string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("config: read config file: %w", err)
	}
	var parser koanf.Parser = yaml.Parser()
	if strings.EqualFold(filepath.Ext(path), ".toml") {
		parser = toml.Parser()
	}
	fk := koanf.New(".")
	if err := fk.Load(rawbytes.Provider(b), parser); err != nil {
		return nil, nil, fmt.Errorf("config: %s: %s", path, oneLine(err.Error()))
	}
	raw, err := expandValues("", normalizeMaps(fk.Raw()), getenv)
	if err != nil {
		return nil, nil, err
	}
	m, _ := raw.(map[string]any)
	if err := checkShape(m); err != nil {
		return nil, nil, err
	}
	return m, unknownKeyWarnings(path, m), nil
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
}

// normalizeMaps turns map[any]any (YAML mappings with non-string keys) into map[string]any
// and drops null values, recursively, so that later stages see one shape.
func normalizeMaps(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if e != nil {
				out[k] = normalizeMaps(e)
			}
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if e != nil {
				out[fmt.Sprint(k)] = normalizeMaps(e)
			}
		}
		return out
	case []any:
		out := make([]any, 0, len(x))
		for _, e := range x {
			out = append(out, normalizeMaps(e))
		}
		return out
	case []map[string]any:
		out := make([]any, 0, len(x))
		for _, e := range x {
			out = append(out, normalizeMaps(e))
		}
		return out
	}
	return v
}

// checkShape rejects sections of the wrong kind before koanf merges them away silently.
func checkShape(m map[string]any) error {
	if v, ok := m["appproxy"]; ok {
		if _, ok := v.(map[string]any); !ok {
			return errors.New("config: appproxy: must be a mapping")
		}
	}
	if v, ok := m["fallbacks"]; ok {
		if _, ok := v.(map[string]any); !ok {
			return errors.New("config: fallbacks: must be a mapping (model: [alternate, ...])")
		}
	}
	if v, ok := m["backends"]; ok {
		list, ok := v.([]any)
		if !ok {
			return errors.New("config: backends: must be a list")
		}
		for i, e := range list {
			if _, ok := e.(map[string]any); !ok {
				return fmt.Errorf("config: backends[%d]: must be a mapping", i)
			}
		}
	}
	return nil
}

// expandValues replaces ${NAME} in every string value (never in keys). path names the value
// in error messages.
func expandValues(path string, v any, getenv func(string) string) (any, error) {
	join := func(key string) string {
		if path == "" {
			return key
		}
		return path + "." + key
	}
	switch x := v.(type) {
	case string:
		s, err := expandString(x, getenv)
		if err != nil {
			return nil, fmt.Errorf("config: %s: %w", path, err)
		}
		return s, nil
	case map[string]any:
		for _, key := range sortedKeys(x) { // sorted: the same file always names the same key
			out, err := expandValues(join(key), x[key], getenv)
			if err != nil {
				return nil, err
			}
			x[key] = out
		}
	case []any:
		for i, e := range x {
			out, err := expandValues(fmt.Sprintf("%s[%d]", path, i), e, getenv)
			if err != nil {
				return nil, err
			}
			x[i] = out
		}
	}
	return v, nil
}

// expandString substitutes ${NAME}; "$${" is a literal "${" and any other "$" is kept, so
// secrets that merely contain a dollar sign survive. An unset or empty variable is an error:
// starting with an empty secret would be worse than not starting.
func expandString(s string, getenv func(string) string) (string, error) {
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		if i > 0 && s[i-1] == '$' {
			b.WriteString(s[:i-1])
			b.WriteString("${")
			s = s[i+2:]
			continue
		}
		b.WriteString(s[:i])
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", errors.New(`unterminated "${"`)
		}
		name := s[i+2 : i+end]
		if !isEnvName(name) {
			return "", fmt.Errorf("invalid variable reference %q (want ${NAME})", s[i:i+end+1])
		}
		val := getenv(name)
		if val == "" {
			return "", fmt.Errorf("environment variable %s is not set", name)
		}
		b.WriteString(val)
		s = s[i+end+1:]
	}
}

func isEnvName(s string) bool {
	if s == "" || (s[0] >= '0' && s[0] <= '9') {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// unknownKeyWarnings names every key the server does not read; misspelled keys otherwise
// vanish without a trace.
func unknownKeyWarnings(path string, m map[string]any) []string {
	top := slices.Clone(fileOnlyKeys)
	for _, s := range settings {
		top = append(top, s.key)
	}
	var warns []string
	warn := func(name, key string, known []string) {
		w := fmt.Sprintf("config: %s: unknown key %q ignored", path, name)
		if guess := closestKey(key, known); guess != "" {
			w += fmt.Sprintf(" (did you mean %q?)", guess)
		}
		warns = append(warns, w)
	}
	for _, key := range sortedKeys(m) {
		if !slices.Contains(top, key) {
			warn(key, key, top)
		}
	}
	if ap, ok := m["appproxy"].(map[string]any); ok {
		for _, key := range sortedKeys(ap) {
			if !slices.Contains(appProxyKeys, key) {
				warn("appproxy."+key, key, appProxyKeys)
			}
		}
	}
	list, _ := m["backends"].([]any)
	for i, e := range list {
		be, _ := e.(map[string]any)
		for _, key := range sortedKeys(be) {
			if !slices.Contains(backendKeys, key) {
				warn(fmt.Sprintf("backends[%d].%s", i, key), key, backendKeys)
			}
		}
	}
	return warns
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// closestKey suggests a known key within a small edit distance of a misspelling.
func closestKey(key string, known []string) string {
	best, bestDist := "", 4
	for _, k := range known {
		if d := editDistance(strings.ToLower(key), k); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
