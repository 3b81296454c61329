//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package h1

import "syscall"

// probe looks at an idle connection's socket without reading from it: a peek that does not
// block tells an open, quiet connection (EAGAIN) from one the upstream closed (EOF) or wrote
// to unasked. It costs one system call when a connection leaves the pool, and spares every
// idle connection the goroutine that net/http parks on it to notice the same.
type probe struct {
	rc   syscall.RawConn
	peek func(fd uintptr) bool // p.read bound once: no allocation per check
	buf  [1]byte
	n    int
	err  error
}

func (p *probe) init(sc syscall.Conn) {
	rc, err := sc.SyscallConn()
	if err != nil {
		return
	}
	p.rc = rc
	p.peek = p.read
}

func (p *probe) alive() bool {
	if p.rc == nil {
		return true // nothing to look at: the retry on a dead connection covers it
	}
	if err := p.rc.Read(p.peek); err != nil {
		return false
	}
	return p.err == syscall.EAGAIN || p.err == syscall.EWOULDBLOCK
}

// read is called by the runtime with the socket; returning true means "done, do not wait".
func (p *probe) read(fd uintptr) bool {
	for {
		p.n, _, p.err = syscall.Recvfrom(int(fd), p.buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		if p.err != syscall.EINTR {
			return true
		}
	}
}

// gone reports whether a client connection, with nothing left of its request to read, has
// ended: end of file or an error. Bytes waiting (a pipelined request) or none (EAGAIN) mean
// the client is still there.
func (p *probe) gone() bool {
	if p.rc == nil {
		return false
	}
	if err := p.rc.Read(p.peek); err != nil {
		return true
	}
	switch {
	case p.err == nil:
		return p.n == 0
	case p.err == syscall.EAGAIN || p.err == syscall.EWOULDBLOCK:
		return false
	}
	return true
}
