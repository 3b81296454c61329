package usage

import (
	"bytes"

	"modelrelay/relay/rawjson"
)

// This file is the data plane's gate: the cheap test every event passes before anything
// else is done with it.

// usageKey is the gate of the data plane: an event (or a JSON answer's tail) without these
// bytes is never parsed. A usage member is recognised only by them: a name spelled with
// escapes ("us\u0061ge"), which no server writes, is not a usage member.
var usageKey = []byte(`"usage"`)

var null = []byte("null")

// isUsage reports whether a member's name, as written (quotes included), is usage.
func isUsage(key []byte) bool { return string(key) == `"usage"` }

// indexUsage is bytes.Index(b, usageKey), fast on JSON: bytes.Index looks for the first byte,
// a quote, which JSON is full of (it costs ten times a scan for a newline on a chat chunk),
// where a g is rare.
func indexUsage(b []byte) int {
	for i := 0; ; {
		j := bytes.IndexByte(b[i:], 'g')
		if j < 0 {
			return -1
		}
		g := i + j // the g of "usage"?
		if g >= 4 && len(b)-g >= 3 && b[g+1] == 'e' && b[g+2] == '"' && string(b[g-4:g]) == `"usa` {
			return g - 4
		}
		i = g + 1
	}
}

// lastIndexUsage is bytes.LastIndex(b, usageKey), fast on JSON as indexUsage is.
func lastIndexUsage(b []byte) int {
	for end := len(b); ; {
		g := bytes.LastIndexByte(b[:end], 'g')
		if g < 0 {
			return -1
		}
		if g >= 4 && len(b)-g >= 3 && b[g+1] == 'e' && b[g+2] == '"' && string(b[g-4:g]) == `"usa` {
			return g - 4
		}
		end = g
	}
}

// mayReport reports whether an event may hold a usage report, or a usage member to strip:
// whether it has a "usage" that is not followed by a colon and null. OpenAI puts
// "usage": null in every chunk of a stream that asked for usage; such chunks are not parsed.
func mayReport(ev []byte) bool {
	for i := 0; ; {
		k := indexUsage(ev[i:])
		if k < 0 {
			return false
		}
		i += k + len(usageKey)
		colon := rawjson.SkipSpace(ev, i)
		if colon >= len(ev) || ev[colon] != ':' || !bytes.HasPrefix(ev[rawjson.SkipSpace(ev, colon+1):], null) {
			return true
		}
	}
}
