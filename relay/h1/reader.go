package h1

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
)

// readBufSize is a connection's read buffer: a response head's line, a chunk-size line and
// the events of a stream fit in it many times over.
const readBufSize = 4 << 10

// readBufs are the read buffers connections borrow. A connection holds one only while bytes
// wait in it or while a read fills it: a connection idle in the pool, or one whose stream is
// quiet between two events, holds none. With thousands of held streams that is 4 KiB each.
var readBufs = sync.Pool{New: func() any { b := make([]byte, readBufSize); return &b }}

// errBufferFull is ReadSlice's answer when no delimiter is found in a full buffer.
var errBufferFull = errors.New("h1: line longer than the read buffer")

// reader is a buffered reader with the part of bufio.Reader's API the parsers use (ReadSlice,
// Read, Peek, Discard, Buffered, with the same rules: a slice returned is valid until the
// next call), whose buffer comes from readBufs and goes back there while the reader waits
// with nothing buffered.
//
// To wait without a buffer, a reader over a TCP socket reads through the socket's raw
// connection: the runtime calls fill with the socket, fill borrows a buffer, and a read that
// finds nothing gives it back before the runtime parks the goroutine until the socket is
// readable. That is the same system calls as net.Conn's Read (a read, and on EAGAIN a wait
// then a read). Any other source (TLS, the parsers' tests) is read with its own Read, which
// holds the buffer while it blocks.
type reader struct {
	src  io.Reader
	rc   syscall.RawConn // src's socket when it is a plain TCP connection
	fill func(fd uintptr) bool
	buf  *[]byte // nil while nothing is buffered and no read is under way
	r, w int     // buffered bytes: (*buf)[r:w]
	err  error   // the source's error, returned once the buffered bytes are read
	// beforeRead, when set, is called once before the next read from the source.
	beforeRead func()
	// The outcome of the last raw read, set by fill.
	n     int
	errno error
}

func newReader(src io.Reader) *reader {
	rd := &reader{src: src}
	if tc, ok := src.(*net.TCPConn); ok {
		if rc, err := tc.SyscallConn(); err == nil {
			rd.rc = rc
			rd.fill = rd.readRaw // bound once: no allocation per read
		}
	}
	return rd
}

// Buffered is the number of bytes that can be read without reading from the source.
func (rd *reader) Buffered() int { return rd.w - rd.r }

// release gives the buffer back when nothing is left in it.
func (rd *reader) release() {
	if rd.buf != nil && rd.r == rd.w {
		readBufs.Put(rd.buf)
		rd.buf, rd.r, rd.w = nil, 0, 0
	}
}

// drop gives the buffer back whatever it holds: the reader is done with.
func (rd *reader) drop() {
	if rd.buf != nil {
		readBufs.Put(rd.buf)
		rd.buf, rd.r, rd.w = nil, 0, 0
	}
}

// more reads once from the source, after what is buffered (moved to the front first). It
// returns with at least one more byte buffered or with rd.err set.
func (rd *reader) more() {
	if rd.err != nil {
		return
	}
	if f := rd.beforeRead; f != nil {
		rd.beforeRead = nil
		f()
	}
	rd.release()
	if rd.buf != nil && rd.r > 0 {
		copy(*rd.buf, (*rd.buf)[rd.r:rd.w])
		rd.w -= rd.r
		rd.r = 0
	}
	if rd.rc != nil {
		rd.moreRaw()
		return
	}
	if rd.buf == nil {
		rd.buf = readBufs.Get().(*[]byte)
	}
	for range 100 { // as bufio: a source that keeps returning nothing is broken
		n, err := rd.src.Read((*rd.buf)[rd.w:])
		if n < 0 || n > len(*rd.buf)-rd.w {
			panic("h1: source returned an impossible count")
		}
		rd.w += n
		if err != nil {
			rd.err = err
			return
		}
		if n > 0 {
			return
		}
	}
	rd.err = io.ErrNoProgress
}

func (rd *reader) moreRaw() {
	if err := rd.rc.Read(rd.fill); err != nil {
		rd.err = err // a deadline or a closed connection, already a *net.OpError
		return
	}
	switch {
	case rd.errno != nil:
		rd.err = &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", rd.errno)}
	case rd.n == 0:
		rd.err = io.EOF
	default:
		rd.w += rd.n
	}
}

// readRaw is called by the runtime with the socket; returning false parks the goroutine until
// the socket is readable, then it is called again.
func (rd *reader) readRaw(fd uintptr) bool {
	if rd.buf == nil {
		rd.buf = readBufs.Get().(*[]byte)
	}
	for {
		n, err := syscall.Read(int(fd), (*rd.buf)[rd.w:])
		switch err {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			rd.release() // wait holding nothing, unless part of a line is buffered
			return false
		case nil:
			rd.n, rd.errno = n, nil
		default:
			rd.n, rd.errno = 0, err
		}
		return true
	}
}

// takeErr returns the source's error once the buffer is empty, and forgets it.
func (rd *reader) takeErr() error {
	err := rd.err
	rd.err = nil
	return err
}

// Read reads into p: what is buffered, else one read from the source. A read as large as the
// buffer goes straight into p.
func (rd *reader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		if rd.Buffered() > 0 {
			return 0, nil
		}
		return 0, rd.takeErr()
	}
	if rd.r == rd.w {
		if rd.err != nil {
			return 0, rd.takeErr()
		}
		rd.more()
		if rd.r == rd.w {
			return 0, rd.takeErr()
		}
	}
	n := copy(p, (*rd.buf)[rd.r:rd.w])
	rd.r += n
	return n, nil
}

// ReadSlice reads up to and including delim, returning a slice of the buffer. errBufferFull
// says the buffer filled without one; the error of the source comes with what was left.
func (rd *reader) ReadSlice(delim byte) ([]byte, error) {
	searched := 0
	for {
		if rd.buf != nil {
			if i := bytes.IndexByte((*rd.buf)[rd.r+searched:rd.w], delim); i >= 0 {
				line := (*rd.buf)[rd.r : rd.r+searched+i+1]
				rd.r += searched + i + 1
				return line, nil
			}
		}
		if rd.err != nil {
			if rd.buf == nil {
				return nil, rd.takeErr()
			}
			line := (*rd.buf)[rd.r:rd.w]
			rd.r = rd.w
			return line, rd.takeErr()
		}
		if rd.Buffered() == readBufSize {
			line := (*rd.buf)[rd.r:rd.w]
			rd.r = rd.w
			return line, errBufferFull
		}
		searched = rd.Buffered()
		rd.more()
	}
}

// Peek returns the next n bytes without consuming them; fewer, with the reason, when the
// source ends first. n must not exceed the buffer.
func (rd *reader) Peek(n int) ([]byte, error) {
	for rd.Buffered() < n && rd.err == nil {
		rd.more()
	}
	if rd.buf == nil {
		if n == 0 {
			return nil, nil
		}
		return nil, rd.err
	}
	b := (*rd.buf)[rd.r:rd.w]
	if len(b) >= n {
		return b[:n], nil
	}
	return b, rd.err
}

// Discard skips n buffered bytes; callers discard only what they peeked.
func (rd *reader) Discard(n int) {
	rd.r += min(n, rd.Buffered())
}
