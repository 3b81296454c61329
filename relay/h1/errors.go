package h1

import (
	"errors"
	"fmt"
	"net"
	"strconv"
)

// ErrMalformed is wrapped by every error that reports a response breaking HTTP/1.1's syntax or
// framing rules. Such a connection is never reused: where one message ends is no longer known.
var ErrMalformed = errors.New("malformed response")

// ErrUnanswered is wrapped, beside the context's error, when the context ended after the
// whole request had gone out and before the answer's head arrived: the upstream had the
// request and did not answer in time. A context that ends sooner (in the dial, or while the
// request is still being written) leaves it out.
var ErrUnanswered = errors.New("no answer to the whole request")

// errHeadTooLarge is a head past its size limit: 64 KiB for an answer, Server.MaxHeaderBytes
// for a request.
var errHeadTooLarge = malformed("head over its size limit")

func malformed(what string) error {
	return fmt.Errorf("h1: %w: %s", ErrMalformed, what)
}

// malformedLine quotes the start of the offending line: enough for an operator to recognise
// the upstream's mistake, never a whole header block in a log line.
func malformedLine(what string, line []byte) error {
	const show = 48
	if len(line) > show {
		return fmt.Errorf("h1: %w: %s: %s and %d bytes more", ErrMalformed, what,
			strconv.Quote(string(line[:show])), len(line)-show)
	}
	return fmt.Errorf("h1: %w: %s: %s", ErrMalformed, what, strconv.Quote(string(line)))
}

// handshakeError is a failed TLS handshake, reported inside a *net.OpError with Op "dial": the
// request was never sent, exactly as when the TCP dial fails. It keeps Timeout(), which
// net.OpError reads from its Err directly rather than through the wrap chain.
type handshakeError struct{ err error }

func (e *handshakeError) Error() string { return "tls handshake: " + e.err.Error() }
func (e *handshakeError) Unwrap() error { return e.err }

func (e *handshakeError) Timeout() bool {
	var ne net.Error
	return errors.As(e.err, &ne) && ne.Timeout()
}

func (e *handshakeError) Temporary() bool { return e.Timeout() }
