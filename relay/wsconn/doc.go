// Package wsconn is what the relay server and the worker daemon share about their WebSocket
// connection beyond the WebSocket library: the one writer sends the frames it has queued in
// one write (Conn), each frame is encoded into a reused buffer (Buffer), and the reader reads
// every message into the one buffer it reuses (Reader).
package wsconn
