// Package daemon is the relay worker daemon: it dials a ModelRelay server over WebSocket,
// registers the models of one local inference backend, and forwards every request the server
// hands it to that backend over HTTP, streaming the answer back frame by frame.
//
// The daemon only ever sends the frames a Rust modelrelay-server accepts (register, pong,
// models_update, response_chunk, response_complete); every failure, including a refused or
// cancelled request, is reported as a response_complete with an HTTP status, never as an
// error frame, so the server always learns that the request's slot is free again.
package daemon
