package translate

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"modelrelay/relay/rawjson"
)

// Request is what a mapped request needs on its way back.
type Request struct {
	Model        string // as the client asked
	Stream       bool
	IncludeUsage bool // OpenAI client asked for the usage chunk (stream_options.include_usage)
}

// ErrInvalid is matched (errors.Is) by every mapping error caused by the client's body:
// answer 400. The error's text is the reason alone, in the API's terms, for the client.
var ErrInvalid = errors.New("invalid request")

// ErrTooLarge is wrapped by the error of a request over MaxItems: answer 413.
var ErrTooLarge = errors.New("too many messages, content blocks and tools to translate")

// MaxItems bounds the messages, content blocks (parts, tool calls, the blocks of a system
// prompt or of a tool result) and tools of one translated request, counted together. A
// mapping's work grows with them and a target's parsing cost too; real traffic stays far
// below (a long Claude Code session sends a few thousand), and a body of the size limit made
// of tiny blocks would hold hundreds of thousands.
const MaxItems = 10_000

// invalidError is the client's mistake, its text the reason alone in the API's terms.
type invalidError string

func (e invalidError) Error() string      { return string(e) }
func (invalidError) Is(target error) bool { return target == ErrInvalid }

func invalid(format string, args ...any) error {
	return invalidError(fmt.Sprintf(format, args...))
}

func tooLarge() error {
	return fmt.Errorf("%w: at most %d in all", ErrTooLarge, MaxItems)
}

// out is what a mapping writes. A mapping runs twice over the same body: dry, counting the
// bytes it would write (an upper bound where a value is compacted or decoded) and checking
// everything, then for real into a buffer allocated once at that size. The dry run is
// where every error is found.
type out struct {
	b     []byte
	n     int // dry: the bytes counted so far
	dry   bool
	items int // dry: messages, blocks and tools so far
}

func (o *out) raw(p []byte) {
	if o.dry {
		o.n += len(p)
	} else {
		o.b = append(o.b, p...)
	}
}

func (o *out) str(s string) {
	if o.dry {
		o.n += len(s)
	} else {
		o.b = append(o.b, s...)
	}
}

// text writes a string value's text, as escaped in the body (no quotes).
func (o *out) text(s []byte) { o.raw(inner(s)) }

// value writes a string value as it is, or "" when it is absent or null.
func (o *out) value(s []byte) {
	if present(s) == nil {
		o.str(`""`)
		return
	}
	o.raw(s)
}

// compact writes the JSON value v without insignificant space.
func (o *out) compact(v []byte) {
	if o.dry {
		o.n += len(v)
	} else {
		o.b = appendCompact(o.b, v)
	}
}

// escaped writes p as the text of a JSON string: its JSON, compacted when compact is set.
func (o *out) escaped(p []byte, compact bool) {
	switch {
	case o.dry:
		o.n += escapedCompactLen(p)
	case compact:
		o.b = appendEscapedCompact(o.b, p)
	default:
		o.b = appendEscaped(o.b, p)
	}
}

// count notes one more message, block or tool.
func (o *out) count() error {
	if !o.dry {
		return nil
	}
	if o.items++; o.items > MaxItems {
		return tooLarge()
	}
	return nil
}

// countElements notes each element of the list arr.
func (o *out) countElements(arr []byte) error {
	if !o.dry || kind(arr) != '[' {
		return nil
	}
	return eachElement(arr, func(int, []byte) error { return o.count() })
}

// mapBody runs write twice (see out) and returns what it wrote.
func mapBody(write func(o *out) error) ([]byte, error) {
	o := out{dry: true}
	if err := write(&o); err != nil {
		return nil, err
	}
	o.b, o.dry = make([]byte, 0, o.n), false
	if err := write(&o); err != nil {
		return nil, err
	}
	return o.b, nil
}

// checkBody is what every mapping checks first: the walk trusts the body's syntax.
func checkBody(body []byte) error {
	if !utf8.Valid(body) {
		return invalid("request body is not valid UTF-8")
	}
	if !rawjson.Valid(body) {
		return invalid("request body is not valid JSON")
	}
	if kind(body[skipSpace(body, 0):]) != '{' {
		return invalid("request body must be a JSON object")
	}
	return nil
}

// typeError is a member of the wrong type. Its path grows as it is returned through the
// values that hold it (see at), so that the client reads messages[2].content[0].text.
type typeError struct {
	path, want string
}

func (e *typeError) Error() string {
	return e.path + " must be " + e.want
}

func (e *typeError) Unwrap() error { return ErrInvalid }

// at names where err happened: inside the value format names, when err is a typeError.
func at(err error, format string, args ...any) error {
	te, ok := err.(*typeError)
	if !ok {
		return err
	}
	where := fmt.Sprintf(format, args...)
	if te.path != "" {
		where += "." + te.path
	}
	return &typeError{path: where, want: te.want}
}

// checks finds the first member of a value that has the wrong type. A known member must
// have its type, or be null (which means not given), as the API documents it.
type checks struct{ err error }

func (c *checks) want(v []byte, field, want string, kinds string) {
	if c.err != nil {
		return
	}
	if k := kind(v); k != 0 && k != 'n' && !strings.ContainsRune(kinds, rune(k)) {
		c.err = &typeError{path: field, want: want}
	}
}

func (c *checks) str(v []byte, field string)    { c.want(v, field, "a string", `"`) }
func (c *checks) object(v []byte, field string) { c.want(v, field, "an object", "{") }
func (c *checks) array(v []byte, field string)  { c.want(v, field, "an array", "[") }
func (c *checks) boolean(v []byte, field string) {
	c.want(v, field, "a boolean", "tf")
}

// integer: as the API's integer parameters are.
func (c *checks) integer(v []byte, field string) {
	if c.err != nil || present(v) == nil {
		return
	}
	if _, err := strconv.ParseInt(string(v), 10, 64); kind(v) != '0' || err != nil {
		c.err = &typeError{path: field, want: "an integer"}
	}
}

// number: any finite number.
func (c *checks) number(v []byte, field string) {
	if c.err != nil || present(v) == nil {
		return
	}
	if f, err := strconv.ParseFloat(string(v), 64); kind(v) != '0' || err != nil || math.IsInf(f, 0) {
		c.err = &typeError{path: field, want: "a number"}
	}
}

// value checks v itself (an element of a list): an object, or null.
func (c *checks) value(v []byte) { c.object(v, "") }

// isTrue reports whether the boolean value v is true.
func isTrue(v []byte) bool { return kind(v) == 't' }

// intValue is the integer value v (checked with wantInt), or def when it is absent.
func intValue(v []byte, def int) int {
	if kind(v) != '0' {
		return def
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return def
	}
	return int(n)
}

// comma writes the separator before every element of a list but its first.
type comma bool

func (c *comma) next(o *out) {
	if *c {
		o.str(",")
	}
	*c = true
}

// writeTool writes one tool in the other family's shape: inside open and close, its name, its
// description when it has one, and its JSON schema after schemaMember (`,"parameters":` or
// `,"input_schema":`; an empty object schema when the client gave none: both families require
// one).
func writeTool(o *out, open string, name, description []byte, schemaMember string, schema []byte, close string) {
	o.str(open)
	o.str(`{"name":`)
	o.value(name)
	if !isEmpty(description) {
		o.str(`,"description":`)
		o.raw(description)
	}
	o.str(schemaMember)
	if present(schema) == nil {
		o.str(`{"type":"object","properties":{}}`)
	} else {
		o.compact(schema)
	}
	o.str("}")
	o.str(close)
}
