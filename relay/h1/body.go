package h1

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
)

// body is a response body as the caller reads it. It removes the framing, hands the
// connection back the moment the last byte is read (so a caller that stops at EOF without
// calling Close still returns it), and closes the connection when the caller stops early.
type body struct {
	br   *reader
	x    *exchange // nil when reading from a plain reader (the parser's tests and fuzzing)
	kind framing
	n    int64 // bytes left: of the whole body (lengthBody) or of the current chunk
	// The chunked coding's position, the framing overhead so far, and what is left of the
	// trailer section's budget.
	at          chunkAt
	excess      int64
	trailerLeft int
	err         error // sticky; io.EOF once the body ended cleanly. Written by Read only.
	// done is set by whichever of Read (at the end) and Close is first to let go of the
	// connection. Close may run while a Read is blocked, to abort it.
	done atomic.Bool
}

type chunkAt uint8

const (
	atSize    chunkAt = iota // before a chunk-size line
	inData                   // inside a chunk's data (n bytes left)
	atDataEnd                // before the CRLF that follows a chunk's data
	inTrailer                // after the last chunk, in the trailer section
)

var errBodyClosed = errors.New("h1: read on a closed response body")

// start sets the body up after its head. A body with nothing to read is over at once, and
// so is the answer's use of the connection.
func (b *body) start(br *reader, x *exchange, kind framing, length int64) {
	b.br, b.x, b.kind = br, x, kind
	switch kind {
	case noBody:
		b.err = io.EOF
		b.finish(true)
	case lengthBody:
		b.n = length
	}
}

func (b *body) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.done.Load() {
		return 0, errBodyClosed
	}
	if len(p) == 0 {
		return 0, nil // never block on a read that cannot return anything
	}
	var n int
	var err error
	switch b.kind {
	case lengthBody:
		n, err = b.readLength(p)
	case chunkedBody:
		n, err = b.readChunked(p)
	case closeBody:
		n, err = b.br.Read(p)
	default:
		err = io.EOF
	}
	if err != nil {
		b.end(err)
		err = b.err
	}
	return n, err
}

// Wait blocks until the body has a byte buffered to read, or its end or failure is known;
// Read then returns without waiting for the network. A copy loop that calls it before it takes
// a buffer to Read into holds no buffer of its own while a stream is quiet.
func (b *body) Wait() {
	if b.err == nil && !b.done.Load() && b.br.Buffered() == 0 {
		b.br.Peek(1) // an error is kept in the reader for Read to report
	}
}

// Close lets go of the connection. Before the end of the body that means closing it: the
// rest of the body is still on its way, and reading it to reuse the connection could take
// as long as the upstream likes.
func (b *body) Close() error {
	if b.done.CompareAndSwap(false, true) && b.x != nil {
		b.x.release(false, true)
	}
	return nil
}

// end records how the body ended and lets go of the connection.
func (b *body) end(err error) {
	if err == io.EOF {
		b.err = io.EOF
		// A body delimited by the close has no next request behind it.
		b.finish(b.kind != closeBody)
		return
	}
	b.err = b.explain(err)
	b.finish(false)
}

func (b *body) finish(ok bool) {
	if b.done.CompareAndSwap(false, true) && b.x != nil {
		b.x.release(ok, !ok || !b.x.keepAlive)
	}
}

// explain says why the body could not be read: the caller's context when it ended (the read
// failed because the connection's deadline was set to abort it), else what the connection or
// the framing said.
func (b *body) explain(err error) error {
	switch {
	case b.done.Load():
		return errBodyClosed
	case b.x != nil && b.x.ctx.Err() != nil:
		return fmt.Errorf("h1: read response body: %w", b.x.ctx.Err())
	case errors.Is(err, ErrMalformed):
		return err
	case err == io.ErrUnexpectedEOF:
		return fmt.Errorf("h1: response body cut short: %w", err)
	}
	return fmt.Errorf("h1: read response body: %w", err)
}

func (b *body) readLength(p []byte) (int, error) {
	if int64(len(p)) > b.n {
		p = p[:b.n]
	}
	n, err := b.br.Read(p)
	b.n -= int64(n)
	if b.n == 0 {
		// EOF with the last bytes: the connection goes back to the pool now, not on a
		// Read the caller may never make.
		return n, io.EOF
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// readChunked fills p from as many chunks as are already buffered, blocking only when it
// has nothing to return yet: each event of a stream reaches the caller as soon as it arrives,
// and the end of the body is seen (and the connection released) as soon as it is buffered.
func (b *body) readChunked(p []byte) (n int, err error) {
	for {
		switch b.at {
		case atSize:
			if n > 0 && !b.lineBuffered() {
				return n, nil
			}
			if err := b.chunkHeader(); err != nil {
				return n, err
			}
		case inData:
			if n == len(p) || n > 0 && b.br.Buffered() == 0 {
				return n, nil
			}
			q := p[n:]
			if int64(len(q)) > b.n {
				q = q[:b.n]
			}
			m, err := b.br.Read(q)
			n += m
			if b.n -= int64(m); b.n == 0 {
				b.at = atDataEnd
			}
			if err != nil {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return n, err
			}
		case atDataEnd:
			if n > 0 && b.br.Buffered() < 2 {
				return n, nil
			}
			crlf, err := b.br.Peek(2)
			if err != nil {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return n, err
			}
			if crlf[0] != '\r' || crlf[1] != '\n' {
				return n, malformed("chunk data not followed by CRLF")
			}
			b.br.Discard(2)
			b.at = atSize
		case inTrailer:
			if n > 0 && !b.lineBuffered() {
				return n, nil
			}
			last, err := b.trailerLine()
			if err != nil {
				return n, err
			}
			if last {
				return n, io.EOF
			}
		}
	}
}

func (b *body) chunkHeader() error {
	line, err := readChunkLine(b.br)
	if err != nil {
		return err
	}
	size, err := parseChunkSize(line)
	if err != nil {
		return err
	}
	if overhead(&b.excess, line, size) {
		return malformed("chunked body with too much framing for its data")
	}
	if size == 0 {
		b.at, b.trailerLeft = inTrailer, maxTrailerBytes
		return nil
	}
	b.at, b.n = inData, size
	return nil
}

// trailerLine reads one line of the trailer section, checked like a header line and dropped
// (the relay forwards no trailers). last reports the empty line that ends the body.
func (b *body) trailerLine() (last bool, err error) {
	line, err := readChunkLine(b.br)
	if err != nil {
		return false, err
	}
	if b.trailerLeft -= len(line) + 2; b.trailerLeft < 0 {
		return false, malformed("trailer section over 4 KiB")
	}
	if len(line) == 0 {
		return true, nil
	}
	_, err = parseField(line, false)
	return false, err
}

// lineBuffered reports whether a whole line is already buffered, so reading it cannot block.
func (b *body) lineBuffered() bool {
	buf, _ := b.br.Peek(b.br.Buffered())
	return bytes.IndexByte(buf, '\n') >= 0
}
