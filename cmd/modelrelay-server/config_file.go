package main

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/knadh/koanf/parsers/toml/v2"
	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/rawbytes"
	"github.com/knadh/koanf/v2"
)

// configFile is what readConfigFile found in the file.
type configFile struct {
	values   map[string]any
	warnings []string // unknown keys
	vars     []string // the environment variables its values interpolate, sorted
}

// readConfigFile parses the file (TOML for *.toml, YAML otherwise), expands ${ENV_VAR} in
// values, drops nulls (an empty value means "use the default") and reports unknown keys. A
// value that cannot be expanded and a section of the wrong kind are recorded in p and left
// out; err is for a file that cannot be read or parsed at all.
func readConfigFile(path string, getenv func(string) string, p *problems) (configFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return configFile{}, fmt.Errorf("config: read config file: %w", err)
	}
	var parser koanf.Parser = yaml.Parser()
	if strings.EqualFold(filepath.Ext(path), ".toml") {
		parser = toml.Parser()
	}
	fk := koanf.New(".")
	if err := fk.Load(rawbytes.Provider(b), parser); err != nil {
		return configFile{}, fmt.Errorf("config: %s: %s", path, oneLine(err.Error()))
	}
	x := expander{getenv: getenv, p: p, vars: map[string]bool{}}
	m, _ := x.values("", normalizeMaps(fk.Raw())).(map[string]any)
	checkShape(m, p)
	return configFile{values: m, warnings: unknownKeyWarnings(path, m), vars: slices.Sorted(maps.Keys(x.vars))}, nil
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

// checkShape rejects sections of the wrong kind before koanf merges them away silently; a
// rejected section is left out, so that the rest can still be checked.
func checkShape(m map[string]any, p *problems) {
	for _, section := range []string{"appproxy", "cache"} {
		if v, ok := m[section]; ok {
			if _, ok := v.(map[string]any); !ok {
				p.add(section, "must be a mapping")
				delete(m, section)
			}
		}
	}
	if v, ok := m["models"]; ok {
		if _, ok := v.(map[string]any); !ok {
			p.add("models", "must be a mapping (model: {cache: default, reasoning: true})")
			delete(m, "models")
		}
	}
	if v, ok := m["fallbacks"]; ok {
		if _, ok := v.(map[string]any); !ok {
			p.add("fallbacks", "must be a mapping (model: [alternate, ...])")
			delete(m, "fallbacks")
		}
	}
	if v, ok := m["backends"]; ok {
		list, ok := v.([]any)
		if !ok {
			p.add("backends", "must be a list")
			delete(m, "backends")
			return
		}
		for i, e := range list {
			if _, ok := e.(map[string]any); !ok {
				p.add(fmt.Sprintf("backends[%d]", i), "must be a mapping")
				delete(m, "backends")
				return
			}
		}
	}
}

// expander replaces ${NAME} in every string value (never in keys), remembering the names it
// looked up. A value that cannot be expanded is recorded in p under its key and dropped.
type expander struct {
	getenv func(string) string
	p      *problems
	vars   map[string]bool
}

// values expands v in place; path names it in problems. It returns nil for a string that
// could not be expanded, which its parent then drops.
func (x *expander) values(path string, v any) any {
	join := func(key string) string {
		if path == "" {
			return key
		}
		return path + "." + key
	}
	switch v := v.(type) {
	case string:
		s, err := x.expand(v)
		if err != nil {
			x.p.add(path, "%v", err)
			return nil
		}
		return s
	case map[string]any:
		for _, key := range sortedKeys(v) { // sorted: the same file always names the same key
			if out := x.values(join(key), v[key]); out != nil {
				v[key] = out
			} else {
				delete(v, key)
			}
		}
	case []any:
		for i, e := range v {
			// A list element cannot be dropped without shifting its neighbours' indexes in
			// later messages; an empty string is what decoders of lists skip or refuse.
			if out := x.values(fmt.Sprintf("%s[%d]", path, i), e); out != nil {
				v[i] = out
			} else {
				v[i] = ""
			}
		}
	}
	return v
}

// expand substitutes ${NAME}; "$${" is a literal "${" and any other "$" is kept, so
// secrets that merely contain a dollar sign survive. An unset or empty variable is an error:
// starting with an empty secret would be worse than not starting.
func (x *expander) expand(s string) (string, error) {
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
		x.vars[name] = true
		val := x.getenv(name)
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
	sections := map[string][]string{"appproxy": appProxyKeys} // section -> its keys
	for _, s := range settings {
		section, key, nested := strings.Cut(s.key, ".")
		if !nested {
			top = append(top, s.key)
			continue
		}
		if sections[section] == nil {
			top = append(top, section)
		}
		sections[section] = append(sections[section], key)
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
	for _, section := range sortedKeys(m) {
		known, ok := sections[section]
		sub, isMap := m[section].(map[string]any)
		if !ok || !isMap {
			continue
		}
		for _, key := range sortedKeys(sub) {
			if !slices.Contains(known, key) {
				warn(section+"."+key, key, known)
			}
		}
	}
	models, _ := m["models"].(map[string]any)
	for _, model := range sortedKeys(models) {
		entry, _ := models[model].(map[string]any)
		for _, key := range sortedKeys(entry) {
			if !slices.Contains(modelKeys, key) {
				warn("models."+quotedName(model)+"."+key, key, modelKeys)
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

// closestKey suggests a known key (or variable) within a small edit distance of a
// misspelling, ignoring case.
func closestKey(key string, known []string) string {
	best, bestDist := "", 4
	for _, k := range known {
		if d := editDistance(strings.ToLower(key), strings.ToLower(k)); d < bestDist {
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
