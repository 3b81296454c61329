// Package wsbatch lets the one writer of a WebSocket connection send the frames it has queued
// in one write to the socket instead of one write each.
//
// gorilla/websocket writes every frame with its own write call, so under load a relay worker's
// connection paid a system call (and, on loopback, the reader's wake-up) per frame. Conn sits
// between the WebSocket library and the socket: between Hold and Flush it keeps what is written
// and sends it together at Flush, and outside them it writes through. Frames are not changed,
// only gathered, so the bytes on the wire are the same.
package wsconn

import (
	"bufio"
	"net"
	"net/http"
	"sync"
	"time"
)

// maxHeld bounds the bytes held before a write goes through anyway: a frame larger than what
// is left is not copied, what is held is written first and the frame after it.
const maxHeld = 64 << 10

// Conn is a net.Conn whose writes can be held and sent in one write. It is safe for the
// concurrent use net.Conn allows; Hold and Flush belong to the connection's one writer.
type Conn struct {
	net.Conn

	mu   sync.Mutex
	held bool
	buf  []byte
	// want is the write deadline last asked for; it reaches the socket only before a write
	// that goes through (set: what the socket has), so frames held together set it once.
	want, set time.Time
}

// New wraps c.
func New(c net.Conn) *Conn { return &Conn{Conn: c} }

// Hold keeps the writes that follow until Flush.
func (c *Conn) Hold() {
	c.mu.Lock()
	c.held = true
	c.mu.Unlock()
}

// Flush writes what was held, in one write, and lets writes through again. Its error is the
// held frames' error: the writes that held them reported success.
func (c *Conn) Flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held = false
	return c.flushLocked()
}

func (c *Conn) flushLocked() error {
	if len(c.buf) == 0 {
		return nil
	}
	_, err := c.writeLocked(c.buf)
	c.buf = c.buf[:0]
	return err
}

// Write holds p while the writer holds, unless it would pass maxHeld; otherwise it writes
// what is held and then p.
func (c *Conn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held && len(c.buf)+len(p) <= maxHeld {
		c.buf = append(c.buf, p...)
		return len(p), nil
	}
	if err := c.flushLocked(); err != nil {
		return 0, err
	}
	return c.writeLocked(p)
}

func (c *Conn) writeLocked(p []byte) (int, error) {
	if !c.want.Equal(c.set) {
		if err := c.Conn.SetWriteDeadline(c.want); err != nil {
			return 0, err
		}
		c.set = c.want
	}
	return c.Conn.Write(p)
}

// SetWriteDeadline applies to the next write that reaches the socket.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	c.want = t
	c.mu.Unlock()
	return nil
}

// SetDeadline sets the read deadline now and the write deadline as SetWriteDeadline does.
func (c *Conn) SetDeadline(t time.Time) error {
	c.SetWriteDeadline(t)
	return c.Conn.SetReadDeadline(t)
}

// Hijacker is an http.ResponseWriter whose Hijack hands the WebSocket upgrader a *Conn, for
// the server side of a connection; Conn is that connection once Hijack has run.
type Hijacker struct {
	http.ResponseWriter
	Conn *Conn
}

// Hijack takes the connection over from net/http, as the upgrader asks, and wraps it.
func (h *Hijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	h.Conn = New(c)
	return h.Conn, rw, nil
}
