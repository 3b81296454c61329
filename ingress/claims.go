package ingress

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// circuitClaims is the claim set of a circuit token, reduced to what the check needs. It decodes
// itself with a small scanner instead of encoding/json's struct or map decoding, for two
// reasons: keys must match exactly, as PyJWT's do (encoding/json would take "ID" or "Exp" for
// "id" and "exp"), and this is the hot path of every authenticated request.
type circuitClaims struct {
	id            string // "" when absent or not a string
	exp, nbf, iat timeClaim
	hasAud        bool // any "aud" key, whatever its value
}

// timeClaim is a NumericDate claim; bad marks a value that is not a number (null included, as
// PyJWT refuses it too).
type timeClaim struct {
	at  *jwt.NumericDate
	bad bool
}

var (
	errClaimsNotObject = errors.New("claims are not a JSON object")
	errClaimOutOfRange = errors.New("claims hold an out-of-range number")
)

func (t timeClaim) get() (*jwt.NumericDate, error) {
	if t.bad {
		return nil, jwt.ErrInvalidType
	}
	return t.at, nil
}

func (c *circuitClaims) GetExpirationTime() (*jwt.NumericDate, error) { return c.exp.get() }
func (c *circuitClaims) GetNotBefore() (*jwt.NumericDate, error)      { return c.nbf.get() }
func (c *circuitClaims) GetIssuedAt() (*jwt.NumericDate, error)       { return c.iat.get() }
func (c *circuitClaims) GetIssuer() (string, error)                   { return "", nil }
func (c *circuitClaims) GetSubject() (string, error)                  { return "", nil }
func (c *circuitClaims) GetAudience() (jwt.ClaimStrings, error)       { return nil, nil }

// UnmarshalJSON reads the top-level members of a JSON object. encoding/json has validated the
// whole text before it calls this, but the scanner still bounds-checks every step so that
// malformed input fails instead of panicking. Later duplicates win, as in json.loads.
func (c *circuitClaims) UnmarshalJSON(b []byte) error {
	*c = circuitClaims{}
	if string(bytes.TrimSpace(b)) == "null" {
		return nil
	}
	s := scanner{b: b}
	if !s.eat('{') {
		return errClaimsNotObject
	}
	if s.eat('}') {
		return nil
	}
	for {
		rawKey, ok := s.str()
		if !ok || !s.eat(':') {
			return errClaimsNotObject
		}
		val, ok := s.value()
		if !ok {
			return errClaimsNotObject
		}
		key, err := memberName(rawKey)
		if err != nil {
			return err
		}
		if err := c.set(key, val); err != nil {
			return err
		}
		if s.eat(',') {
			continue
		}
		if s.eat('}') {
			return nil
		}
		return errClaimsNotObject
	}
}

func (c *circuitClaims) set(key, val []byte) error {
	var err error
	switch string(key) {
	case "id":
		c.id = ""
		if val[0] == '"' {
			c.id, err = decodeString(val)
		}
	case "exp":
		c.exp, err = parseTimeClaim(val)
	case "nbf":
		c.nbf, err = parseTimeClaim(val)
	case "iat":
		c.iat, err = parseTimeClaim(val)
	case "aud":
		c.hasAud = true
	}
	return err
}

// parseTimeClaim reads seconds since the epoch as jwt's MapClaims does, except that 0 is a real
// time (1970) rather than "no claim": exp 0 means expired, as in PyJWT.
func parseTimeClaim(val []byte) (timeClaim, error) {
	if v := val[0]; v != '-' && (v < '0' || v > '9') {
		return timeClaim{bad: true}, nil
	}
	f, err := strconv.ParseFloat(string(val), 64)
	if err != nil {
		return timeClaim{}, errClaimOutOfRange
	}
	sec, frac := math.Modf(f)
	return timeClaim{at: jwt.NewNumericDate(time.Unix(int64(sec), int64(frac*1e9)))}, nil
}

// memberName returns a member name without its quotes, unescaping only when it must (a
// "\u0069d" key is "id" to PyJWT too).
func memberName(q []byte) ([]byte, error) {
	if bytes.IndexByte(q, '\\') < 0 && len(q) >= 2 {
		return q[1 : len(q)-1], nil
	}
	s, err := decodeString(q)
	return []byte(s), err
}

// decodeString turns a quoted JSON string into its value; only strings with escapes or
// non-ASCII bytes go through encoding/json (which also replaces invalid UTF-8, as it would have
// for a map).
func decodeString(q []byte) (string, error) {
	plain := len(q) >= 2 && q[0] == '"' && q[len(q)-1] == '"'
	for i := 1; plain && i < len(q)-1; i++ {
		plain = q[i] >= 0x20 && q[i] < 0x80 && q[i] != '\\' && q[i] != '"'
	}
	if plain {
		return string(q[1 : len(q)-1]), nil
	}
	var s string
	if err := json.Unmarshal(q, &s); err != nil {
		return "", errClaimsNotObject
	}
	return s, nil
}

// scanner walks JSON text that is expected to be valid; every method reports failure rather
// than reading past the end.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\r', '\n':
			s.i++
		default:
			return
		}
	}
}

// eat consumes c (after blank space) if it is next.
func (s *scanner) eat(c byte) bool {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// str returns the next string, quotes included.
func (s *scanner) str() ([]byte, bool) {
	s.space()
	start := s.i
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, false
	}
	for s.i++; s.i < len(s.b); s.i++ {
		switch s.b[s.i] {
		case '\\':
			s.i++
		case '"':
			s.i++
			return s.b[start:s.i], true
		}
	}
	return nil, false
}

// literal returns the next number, true, false or null as text.
func (s *scanner) literal() []byte {
	s.space()
	start := s.i
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			return s.b[start:s.i]
		}
		s.i++
	}
	return s.b[start:s.i]
}

// value returns the next value's text, whatever its kind; never empty when ok.
func (s *scanner) value() ([]byte, bool) {
	s.space()
	if s.i >= len(s.b) {
		return nil, false
	}
	start := s.i
	switch s.b[s.i] {
	case '"':
		return s.str()
	case '{', '[':
		depth := 0
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case '"':
				if _, ok := s.str(); !ok {
					return nil, false
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
			}
			s.i++
			if depth == 0 {
				return s.b[start:s.i], true
			}
		}
		return nil, false
	default:
		if lit := s.literal(); len(lit) > 0 {
			return s.b[start:s.i], true
		}
		return nil, false
	}
}
