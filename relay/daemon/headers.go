package daemon

import (
	"net/http"
	"strings"

	"modelrelay/protocol"
)

// backendRequestHeaders turns the frame's headers into the backend request's, dropping what
// must not be forwarded and anything net/http would refuse to send. Names stay lowercase, as
// the frame has them and as the Rust worker sends them (field names are case-insensitive): the
// request's writer sends names as given, so none needs a canonical copy, and the values share
// one slice.
func backendRequestHeaders(in protocol.Headers) http.Header {
	out := make(http.Header, len(in))
	var conn []string
	for name, value := range in {
		if strings.EqualFold(name, "connection") {
			conn = append(conn, value)
		}
	}
	listed := protocol.ConnectionListed(conn)
	values := make([]string, 0, len(in))
	for name, value := range in {
		lname := strings.ToLower(name) // no copy when it is lowercase already
		// accept-encoding too: the backend must answer uncompressed, because bodies travel as
		// JSON strings and must stay text.
		if !protocol.EndToEnd(lname, listed) || lname == "accept-encoding" || !validHeader(lname, value) {
			continue
		}
		values = append(values, value)
		out[lname] = values[len(values)-1 : len(values) : len(values)]
	}
	return out
}

// frameHeaders turns the backend response's headers into a frame's: lowercase names, repeated
// values joined with ", ", the same filtering as requests.
func frameHeaders(in http.Header) protocol.Headers {
	listed := protocol.ConnectionListed(in.Values("Connection"))
	out := make(protocol.Headers, len(in))
	for name, values := range in {
		lname := strings.ToLower(name)
		if !protocol.EndToEnd(lname, listed) || len(values) == 0 {
			continue
		}
		out[lname] = strings.Join(values, ", ")
	}
	return out
}

// validHeader is the subset of RFC 9110 field syntax net/http enforces before sending.
func validHeader(name, value string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		if !isTokenChar(name[i]) {
			return false
		}
	}
	for i := 0; i < len(value); i++ {
		if c := value[i]; c == '\r' || c == '\n' || c == 0 {
			return false
		}
	}
	return true
}

func isTokenChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
