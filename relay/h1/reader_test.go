package h1

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// tcpPair is a connected pair of loopback TCP connections.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// A reader over a TCP socket waits for the next bytes holding no buffer, and keeps the
// buffer while part of a line waits in it.
func TestReaderWaitsWithoutABuffer(t *testing.T) {
	c, s := tcpPair(t)
	rd := newReader(c)
	if rd.rc == nil {
		t.Fatal("a TCP connection is not read through its raw connection")
	}
	s.Write([]byte("data: one\n\ndata: tw"))
	line, err := rd.ReadSlice('\n')
	if err != nil || string(line) != "data: one\n" {
		t.Fatalf("ReadSlice = %q, %v", line, err)
	}
	if line, err = rd.ReadSlice('\n'); err != nil || string(line) != "\n" {
		t.Fatalf("ReadSlice = %q, %v", line, err)
	}

	// Part of a line is buffered while the reader waits for the rest, and comes back with
	// the error when none comes (as bufio's ReadSlice does).
	c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if line, err := rd.ReadSlice('\n'); string(line) != "data: tw" || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("ReadSlice on a quiet socket = %q, %v; want the partial line and the deadline", line, err)
	}
	c.SetReadDeadline(time.Time{})
	s.Write([]byte("data: two\n"))
	if line, err = rd.ReadSlice('\n'); err != nil || string(line) != "data: two\n" {
		t.Fatalf("ReadSlice = %q, %v", line, err)
	}

	// Nothing is buffered: the reader waits holding nothing.
	c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	p := make([]byte, 16)
	if _, err := rd.Read(p); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read on a quiet socket: %v, want the deadline", err)
	}
	if rd.buf != nil {
		t.Fatal("the reader held its buffer while it waited with nothing buffered")
	}
	c.SetReadDeadline(time.Time{})
	s.Write([]byte("xyz"))
	if n, err := rd.Read(p); err != nil || string(p[:n]) != "xyz" {
		t.Fatalf("Read = %q, %v", p[:n], err)
	}

	s.Close()
	if n, err := rd.Read(p); n != 0 || err != io.EOF {
		t.Fatalf("Read after the peer closed = %d, %v; want EOF", n, err)
	}
}

// Without a socket under it the reader behaves as bufio.Reader: a line over the buffer is
// errBufferFull, the source's error comes after its last bytes, Peek says why it is short.
func TestReaderOverAPlainSource(t *testing.T) {
	long := make([]byte, readBufSize+10)
	for i := range long {
		long[i] = 'a'
	}
	rd := newReader(&oneByteReader{data: append(long, '\n')})
	line, err := rd.ReadSlice('\n')
	if err != errBufferFull || len(line) != readBufSize {
		t.Fatalf("ReadSlice of a long line = %d bytes, %v", len(line), err)
	}
	if line, err = rd.ReadSlice('\n'); err != nil || len(line) != 11 {
		t.Fatalf("the rest of the line = %d bytes, %v", len(line), err)
	}
	if line, err = rd.ReadSlice('\n'); err != io.EOF || len(line) != 0 {
		t.Fatalf("at the end = %q, %v", line, err)
	}

	rd = newReader(&oneByteReader{data: []byte("x")})
	if b, err := rd.Peek(2); string(b) != "x" || err != io.EOF {
		t.Fatalf("Peek(2) of one byte = %q, %v", b, err)
	}
}

// oneByteReader hands out its data a byte per Read, as a slow network would.
type oneByteReader struct{ data []byte }

func (r *oneByteReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	p[0] = r.data[0]
	r.data = r.data[1:]
	return 1, nil
}
