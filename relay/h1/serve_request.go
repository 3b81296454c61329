package h1

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
)

var (
	errNoHost     = malformed("missing Host field")
	errManyHosts  = malformed("more than one Host field")
	errBadHost    = malformed("invalid Host field")
	errExpect     = malformed("unsupported Expect")
	errBadTarget  = malformed("unsupported request target")
	errBadVersion = malformed("unsupported HTTP version")
)

// readRequest reads one request's head into x.r and sets its body up in x. A failure comes
// with the status to answer, or 0 when the client closed before a whole request.
func (c *inbound) readRequest(x *served) (r *http.Request, status int, err error) {
	c.continueSkipped = false
	hr := &c.hr
	hr.br, hr.left, hr.got = c.br, c.s.maxHeaderBytes(), false
	hr.block, hr.fields = hr.block[:0], hr.fields[:0]
	h := head{length: -1}
	var method, target span
	line, err := hr.line()
	if err == nil {
		method, target, h.minor, err = parseRequestLine(line)
	}
	if err == nil {
		err = hr.readFields(&h) // after the request line, which stays in hr.block
	}
	if err != nil {
		return nil, requestErrorStatus(err), err
	}
	// The method, the target and every field are cut from one string of the head: the one
	// copy the handler's strings need, since the head's block is reused. The header map is
	// the handler's too, new for every request: a handler may keep it.
	s := string(hr.block)
	r = &x.r
	r.Method, r.RequestURI = s[method.start:method.end], s[target.start:target.end]
	r.Proto, r.ProtoMajor, r.ProtoMinor = "HTTP/1.1", 1, h.minor
	if h.minor == 0 {
		r.Proto = "HTTP/1.0"
	}
	r.Header = hr.headerOf(&h, s, x.values[:])
	if err := c.target(r, h.minor, &x.url); err != nil {
		return nil, http.StatusBadRequest, err
	}
	r.RemoteAddr = c.remote
	r.Close = h.close || h.minor == 0 && !h.keepAlive
	r.Body = http.NoBody
	switch {
	case h.chunked:
		r.ContentLength, r.TransferEncoding = -1, []string{"chunked"}
		x.body.start(c, chunkedBody, -1)
		r.Body = &x.body
	case h.length > 0:
		r.ContentLength = h.length
		x.body.start(c, lengthBody, h.length)
		r.Body = &x.body
	}
	if expect, ok := r.Header["Expect"]; ok {
		// As net/http: 100-continue (on HTTP/1.1, with a body) is owed on the body's first
		// read; any other expectation is refused with 417.
		switch {
		case len(expect) != 1 || !asciiEqualFold([]byte(expect[0]), "100-continue"):
			return nil, http.StatusExpectationFailed, errExpect
		case h.minor == 1 && r.Body != http.NoBody:
			c.owesContinue.Store(true)
		}
	}
	return r, 0, nil
}

// requestErrorStatus is the answer to a head that could not be read.
func requestErrorStatus(err error) int {
	switch {
	case errors.Is(err, errHeadTooLarge):
		return http.StatusRequestHeaderFieldsTooLarge
	case errors.Is(err, errBadVersion):
		return http.StatusHTTPVersionNotSupported
	case errors.Is(err, ErrMalformed):
		return http.StatusBadRequest
	case errors.Is(err, io.ErrUnexpectedEOF):
		return http.StatusBadRequest // the client sent part of a head and closed its side
	}
	return 0 // the connection failed or timed out: nobody to answer
}

// parseRequestLine parses "method SP request-target SP HTTP/1.x" (RFC 9112 §3): a token, a
// target of visible ASCII (what Do sends too), and version 1.0 or 1.1 exactly, one space
// between each. The method and the target are returned as spans of line.
func parseRequestLine(line []byte) (method, target span, minor int, err error) {
	sp := bytes.IndexByte(line, ' ')
	if sp <= 0 {
		return span{}, span{}, 0, malformedLine("invalid request line", line)
	}
	for _, c := range line[:sp] {
		if !isTokenByte(c) {
			return span{}, span{}, 0, malformedLine("invalid method", line)
		}
	}
	rest := line[sp+1:]
	sp2 := bytes.IndexByte(rest, ' ')
	if sp2 <= 0 || !isTargetText(string(rest[:sp2])) {
		return span{}, span{}, 0, malformedLine("invalid request target", line)
	}
	switch string(rest[sp2+1:]) {
	case "HTTP/1.1":
		minor = 1
	case "HTTP/1.0":
	default:
		return span{}, span{}, 0, errBadVersion
	}
	return span{0, sp}, span{sp + 1, sp + 1 + sp2}, minor, nil
}

// target sets r.URL (u, unless the target needs net/url's parser) and r.Host from the
// request target and the Host field, which it checks as net/http does: exactly one on
// HTTP/1.1, at most one on HTTP/1.0, of host characters only. Origin-form ("/path?query")
// and absolute-form for http and https are served; CONNECT's authority-form (nothing here
// tunnels) and "*" (OPTIONS of the server itself, which net/http answers without its
// handler) are refused.
func (c *inbound) target(r *http.Request, minor int, u *url.URL) error {
	hosts := r.Header["Host"]
	switch {
	case len(hosts) > 1:
		return errManyHosts
	case len(hosts) == 0 && minor == 1:
		return errNoHost
	case len(hosts) == 1 && !validHost(hosts[0]):
		return errBadHost
	}
	delete(r.Header, "Host")
	t := r.RequestURI
	if r.Method == http.MethodConnect || t == "*" {
		return errBadTarget
	}
	if !plainOriginForm(t, u) {
		var err error
		if u, err = url.ParseRequestURI(t); err != nil {
			return malformedLine("invalid request target", []byte(t))
		}
		if t[0] != '/' && (u.Scheme != "http" && u.Scheme != "https" || u.Host == "") {
			return errBadTarget
		}
	}
	r.URL = u
	r.Host = r.URL.Host
	if r.Host == "" && len(hosts) == 1 {
		r.Host = hosts[0]
	}
	return nil
}

// plainOriginForm fills u with what url.ParseRequestURI makes of t when t is an origin-form
// target whose path needs no escaping (letters, digits, "-._~/"): the path as it is, the
// query after the first "?" as it is, and ForceQuery for a "?" with nothing after it. It
// reports false, leaving u alone, for any other target. It spares the inference paths
// (/v1/chat/completions and the like) the parser's allocation of a URL.
func plainOriginForm(t string, u *url.URL) bool {
	if t == "" || t[0] != '/' {
		return false
	}
	path, query, hasQuery := strings.Cut(t, "?")
	for i := 0; i < len(path); i++ {
		if c := path[i]; c >= 0x80 || !pathBytes[c] {
			return false
		}
	}
	u.Path, u.RawQuery, u.ForceQuery = path, query, hasQuery && query == ""
	return true
}

var pathBytes = alnumAnd("-._~/")

// validHost reports whether a Host value holds only the bytes of a host and port (RFC 3986
// reg-name, IP literal, port): net/http's set.
func validHost(h string) bool {
	for i := 0; i < len(h); i++ {
		if c := h[i]; c >= 0x80 || !hostBytes[c] {
			return false
		}
	}
	return true
}

var hostBytes = alnumAnd("!$%&'()*+,-.:;=[]_~")
