package usage

import (
	"math"

	"modelrelay/relay/rawjson"
)

// Counts are the tokens an answer reported.
type Counts struct {
	Input, Output int64
	Seen          bool // the answer reported a usage object at all
}

// The members of a usage object that count. OpenAI's prompt_tokens and the Responses API's
// input_tokens include cached tokens (reported only in *_details objects, which are ignored);
// Anthropic's input_tokens excludes them, so its cache_creation_input_tokens and
// cache_read_input_tokens are added.
const (
	fPrompt     = iota // prompt_tokens: all of the input, when present
	fCompletion        // completion_tokens: all of the output, when present
	fInput             // input_tokens
	fOutput            // output_tokens
	fCacheWrite        // cache_creation_input_tokens
	fCacheRead         // cache_read_input_tokens
	numFields
)

var fieldNames = [numFields]string{
	fPrompt:     "prompt_tokens",
	fCompletion: "completion_tokens",
	fInput:      "input_tokens",
	fOutput:     "output_tokens",
	fCacheWrite: "cache_creation_input_tokens",
	fCacheRead:  "cache_read_input_tokens",
}

// tally is the latest value of each member an answer reported. A stream may report usage
// more than once (Anthropic's message_start then message_delta, vLLM's cumulative usage in
// every chunk): each member a later object carries replaces the earlier value of that
// member, and the sides are computed at the end, so that a message_delta carrying only
// output_tokens keeps message_start's input, and one carrying input_tokens but no cache
// members keeps the cache members message_start reported.
type tally struct {
	val  [numFields]int64
	has  uint8 // bit f: val[f] was reported
	seen bool  // a usage object was reported
}

func (t *tally) set(f int, v int64) {
	t.val[f] = v
	t.has |= 1 << f
}

func (t *tally) ok(f int) bool { return t.has&(1<<f) != 0 }

// merge lays the members o reported over t's.
func (t *tally) merge(o *tally) {
	for f := range numFields {
		if o.ok(f) {
			t.set(f, o.val[f])
		}
	}
	t.seen = t.seen || o.seen
}

// counts computes the sides: input is prompt_tokens if reported, else the sum of the
// input_tokens and cache members reported; output is completion_tokens if reported, else
// output_tokens.
func (t *tally) counts() Counts {
	c := Counts{Seen: t.seen}
	if t.ok(fPrompt) {
		c.Input = t.val[fPrompt]
	} else {
		for _, f := range [...]int{fInput, fCacheWrite, fCacheRead} {
			if t.ok(f) {
				c.Input = addSat(c.Input, t.val[f])
			}
		}
	}
	if t.ok(fCompletion) {
		c.Output = t.val[fCompletion]
	} else if t.ok(fOutput) {
		c.Output = t.val[fOutput]
	}
	return c
}

// addSat adds two non-negative counts, saturating rather than wrapping.
func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// field is the member a key (as written, quotes included) names, or -1.
func field(key []byte) int {
	for f, name := range fieldNames {
		if rawjson.KeyIs(key, name) {
			return f
		}
	}
	return -1
}

// parseCount reads a count: a plain non-negative JSON integer that fits an int64. Anything
// else (negative, a fraction or exponent, a string, null) is not a count and is ignored.
func parseCount(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 1 && b[0] == '0' {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := int64(c - '0')
		if n > (math.MaxInt64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}
