package wsconn

import (
	"errors"
	"io"
	"sync"

	"github.com/gorilla/websocket"
)

// keepMax is the largest buffer kept for reuse: frames are small but for the odd request or
// answer that carries a large body, whose buffer goes back to the garbage collector rather
// than stay with the process.
const keepMax = 64 << 10

var buffers = sync.Pool{New: func() any { return new([]byte) }}

// Buffer returns an empty buffer for one frame, or for the body one frame will carry; Release
// gives it back once the frame is written (the body once it is encoded).
func Buffer() *[]byte {
	b := buffers.Get().(*[]byte)
	*b = (*b)[:0]
	return b
}

// Release gives b back; b must not be used after.
func Release(b *[]byte) {
	if cap(*b) <= keepMax {
		buffers.Put(b)
	}
}

// ReadAll appends what r holds, up to its end, to b: io.ReadAll into a buffer that is reused.
func ReadAll(b []byte, r io.Reader) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if errors.Is(err, io.EOF) {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// Reader reads a connection's messages into one buffer it reuses: a message is valid until the
// next Read. (gorilla/websocket's ReadMessage allocates every message anew, growing it from
// 512 bytes.) A connection's reader is one goroutine, which owns its Reader.
type Reader struct {
	buf []byte
}

// Read returns the next message and its type (websocket.TextMessage, …).
func (r *Reader) Read(c *websocket.Conn) (kind int, p []byte, err error) {
	kind, mr, err := c.NextReader()
	if err != nil {
		return 0, nil, err
	}
	b, err := ReadAll(r.buf[:0], mr)
	if err != nil {
		return 0, nil, err
	}
	if cap(b) <= keepMax {
		r.buf = b
	} else {
		r.buf = nil
	}
	return kind, b, nil
}
