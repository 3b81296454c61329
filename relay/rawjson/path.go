package rawjson

import (
	"encoding/json"
	"strconv"
	"strings"
)

// pathAt is the JSON path, from name, of the innermost value of b that holds byte pos. It goes
// down one value at a time, skipping the siblings before the one that holds pos, so it reads b
// a few times at most (once per level it goes down, and a type error lies no deeper than the
// struct that was decoded). On anything that is not valid JSON it gives up (false); it never panics.
func pathAt(name string, b []byte, pos int) (string, bool) {
	if pos < 0 || pos >= len(b) {
		return "", false
	}
	var path strings.Builder
	path.WriteString(name)
	i := SkipSpace(b, 0)
	for {
		end, ok := SkipValue(b, i)
		if !ok || pos < i || pos >= end {
			return "", false
		}
		if pos == i || (b[i] != '{' && b[i] != '[') {
			break // the value itself: a literal, or an object or array at its bracket
		}
		next, ok := child(b, i, pos, &path)
		if !ok {
			break // pos is between the members (a space, a key): the container is the place
		}
		i = next
	}
	return path.String(), true
}

// child finds the member or element of the object or array at b[i] that holds pos, writes its
// step of the path, and returns where it starts.
func child(b []byte, i, pos int, path *strings.Builder) (int, bool) {
	object := b[i] == '{'
	j := SkipSpace(b, i+1)
	for n := 0; j < len(b) && b[j] != '}' && b[j] != ']'; n++ {
		var key []byte
		if object {
			keyEnd, ok := SkipString(b, j)
			if !ok {
				return 0, false
			}
			key = b[j:keyEnd]
			j = SkipSpace(b, keyEnd)
			if j >= len(b) || b[j] != ':' {
				return 0, false
			}
			j = SkipSpace(b, j+1)
		}
		end, ok := SkipValue(b, j)
		if !ok {
			return 0, false
		}
		if j <= pos && pos < end {
			if object {
				writeKey(path, key)
			} else {
				path.WriteString("[" + strconv.Itoa(n) + "]")
			}
			return j, true
		}
		j = SkipSpace(b, end)
		if j < len(b) && b[j] == ',' {
			j = SkipSpace(b, j+1)
		}
	}
	return 0, false
}

// writeKey appends one member's step: ".name" for a plain name, ["name"] for any other.
func writeKey(path *strings.Builder, raw []byte) {
	var key string
	if json.Unmarshal(raw, &key) != nil {
		key = string(raw[1 : len(raw)-1])
	}
	if plain(key) {
		if path.Len() > 0 {
			path.WriteByte('.')
		}
		path.WriteString(cutAt(key, maxKeyBytes))
		return
	}
	path.WriteString("[" + Quote(key) + "]")
}

// plain says whether a key reads well after a dot: letters, digits, _ and -, not empty.
func plain(key string) bool {
	for _, c := range []byte(key) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return key != ""
}
