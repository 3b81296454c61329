// Package h1 is the HTTP/1.1 client of the relay's upstream side: the static backends and
// circuit replicas the server calls, and the model server behind a worker daemon. It replaces
// net/http's Transport there, which profiles put at about 40% of the CPU of either side; it
// does the one job those callers have (one request out, its answer streamed back) with
// nothing of HTTP/2, proxies, redirects, cookies or compression. It imports only the
// standard library.
//
// It also holds Server, an HTTP/1.1 server for an http.Handler on plain connections: the
// inference listener's server when modelrelay-server's http_server is lean, in place of
// net/http's (see "Server" below). Both directions read heads, fields and chunked bodies with
// the one parser, under the same rules.
//
// The surface:
//
//   - Client holds keep-alive connections, pooled per upstream (scheme and host), and Do
//     sends one Request over one of them. It returns when the answer's head has arrived;
//     the body streams as it comes.
//   - Request is the method, URL, Host, end-to-end header fields, body and its length, and
//     whether it may be sent again (Replayable).
//   - Response is the status, the header fields (canonical names, as net/http gives them),
//     the body's length when known, and the body.
//
// # Connections
//
// A connection carries one request at a time. When an answer has been read to its end and
// allows keep-alive (HTTP/1.1 without Connection: close; HTTP/1.0 only with Connection:
// keep-alive and a length), the connection goes back to its upstream's pool. The pool is a
// bounded stack (MaxIdlePerHost): the newest idle connection is taken first and the oldest
// pushed out. No goroutine watches an idle connection: one timer per pool closes those idle
// longer than IdleTimeout, and a connection leaving the pool is checked with a non-blocking
// peek at its socket, which finds one the upstream closed (or wrote to unasked) for the cost
// of one system call.
//
// A connection is closed instead of pooled when the answer says so, when its body was
// delimited by the close, when the caller closes the body before its end, when the context
// ended during the exchange, when the upstream sent bytes beyond the answer, when a 204 or a
// 1xx announced a body, or when anything failed.
//
// # Bodies
//
// A small in-memory request body (a *bytes.Reader, *strings.Reader or *bytes.Buffer up to
// 64 KiB) is written with the head in one write. Any other body is written by a goroutine of
// the exchange, flushed after every read, while Do reads the answer: the answer can begin
// before the body is sent (a stream in both directions, or an early refusal such as a 413).
// That goroutine ends when the body returns EOF or an error, or when the connection fails
// (closed, or aborted by the context); the connection is pooled only once both the answer
// and the body are done. Do never closes the request body.
//
// The answer's body is read as its framing says: Content-Length, chunked (chunk extensions
// ignored, trailers read, checked and dropped), or until the upstream closes. Answers to
// HEAD and answers 1xx, 204 and 304 have none. Interim answers (100 Continue, 103 Early
// Hints) are read and skipped. The read that returns the last bytes also returns io.EOF, and
// by then the connection is back in the pool.
//
// # Cancellation
//
// ctx bounds the whole exchange. The dial and the TLS handshake take it directly. After
// that, context.AfterFunc sets a deadline in the past on the connection when ctx ends,
// which makes a blocked write or read (of the head or of any part of the body) return at
// once: no timer per request, no goroutine per connection. The error then wraps ctx.Err();
// context.DeadlineExceeded is a net.Error whose Timeout() is true. A context that is a
// Watcher takes the abort itself, in place of context.AfterFunc.
//
// # Retry
//
// A request is sent at most twice: only when the connection came from the pool, no byte of
// an answer arrived (the upstream closed an idle connection as the request went out), the
// context is still live, and the request is Replayable (its Body, if any, an io.Seeker,
// rewound to 0). The second attempt goes on a new connection. Like net/http's retry, an
// upstream that read the request and closed without a word can see it twice. A request on a
// new connection is never sent again.
//
// # Errors
//
//   - A failed dial or TLS handshake is a *net.OpError with Op "dial": the upstream never saw
//     the request. (net/http reports a failed handshake otherwise.)
//   - A timeout satisfies net.Error with Timeout() true.
//   - A context that ends after the whole request went out, before the answer's head, gives
//     an error wrapping ErrUnanswered as well as the context's error.
//   - An answer that breaks the rules below wraps ErrMalformed.
//   - A body cut short wraps io.ErrUnexpectedEOF. An upstream that hangs up before any byte
//     of an answer gives an error wrapping io.EOF (or the reset it sent, a *net.OpError with
//     Op "read").
//   - A request body that fails is reported as such ("read request body: ..."), wrapping its
//     error, so that a caller can tell its client's upload from the upstream.
//
// # Strictness
//
// The parser refuses, as ErrMalformed, every answer whose framing two readers could take two
// ways, and the closing of the connection follows:
//
//   - two different Content-Length values, a Content-Length that is not 1*DIGIT within
//     int64 (a list "5, 5" included); a repeated identical value is taken once (RFC 9110
//     §8.6 allows it, net/http does it, and no reader can frame it two ways);
//   - Content-Length together with Transfer-Encoding (RFC 9112 §6.3: "ought to be handled as
//     an error");
//   - Transfer-Encoding other than exactly one "chunked" (gzip, "gzip, chunked", a chunked
//     that is not the only coding, two fields), and Transfer-Encoding on an HTTP/1.0 answer;
//   - a bare LF where CRLF is due, in the head, the chunk lines and the trailers; a bare CR;
//   - obs-fold (RFC 9112 §5.2 lets a gateway refuse it with a 502), whitespace before a
//     field's colon, names that are not tokens, control bytes in values or in the reason;
//   - chunk sizes of more than 16 hex digits or above int64, chunk-size lines over 1 KiB,
//     extensions holding control bytes or preceded by whitespace, chunk data not followed by
//     CRLF, chunk framing far exceeding its data (net/http's rule: 16 bytes a chunk plus
//     twice its size, 16 KiB of slack), a trailer section over 4 KiB, a Trailer field naming
//     a framing field;
//   - status lines other than "HTTP/1.x SP 3DIGIT [SP reason]", codes below 100, and 101
//     (we never ask to switch protocols);
//   - heads over 64 KiB (interim answers counted together with the final one) or of more than
//     512 fields.
//
// FuzzResponse checks that every answer this parser accepts, net/http's ReadResponse
// accepts too and reads the same way. Where net/http accepts more it is on purpose, and
// TestSmuggling pins each case: bare LF line ends in the head (RFC 9112 §2.2 allows a
// recipient to take them; net/http does), obs-fold (net/http unfolds), whitespace in or
// before a field name (net/http keeps such a name as sent, so "Content-Length :" frames
// nothing there), CL with TE (net/http lets TE win), TE on HTTP/1.0 (net/http ignores it and
// reads until close), status codes below 100, "+20", other HTTP versions and two spaces
// after the version, control bytes in the reason and the chunk extensions, chunk-size lines
// from 1 to 4 KiB, folded trailers, and heads over 64 KiB. Two differences of what is read
// from an accepted answer: net/http deletes a Connection field that says close and adds
// Cache-Control: no-cache after Pragma: no-cache; here the fields are as sent.
//
// # Server
//
// Server serves each connection on one goroutine and nothing else: no background reader, no
// timer per request. Read and write buffers (4 KiB each) come from pools and are held only
// while a head or a body is read or written; a handler that waits with its request read to
// the end (a stream between two events) holds neither. A client that leaves is noticed by a
// failed write, or, while the handler waits, by one goroutine per Server that every
// GoneCheckInterval peeks without blocking at the sockets of such handlers and cancels the
// request of one that reads end of file or an error: net/http parks a reading goroutine on
// every connection instead, which costs a goroutine, its stack and a wake-up per request.
//
// Requests are served one at a time per connection, pipelined ones in order. A request body
// is framed by Content-Length or chunked (the same reader as answers' bodies; trailers
// dropped); Expect: 100-continue is answered on the body's first read, any other expectation
// gets 417; what a handler leaves unread (up to 256 KiB) is read and dropped to keep the
// connection, else it closes. Answers are framed by the handler's Content-Length, by the
// length of the whole body when the handler returns before anything was flushed, else
// chunked (until the close for an HTTP/1.0 client). Nothing is sniffed: an answer without a
// Content-Type goes without one. Hijack hands the connection over (WebSocket upgrades).
//
// Requests follow the strictness rules above for fields, lengths, transfer codings, line
// ends and chunks, and these of their own: a request line of a token method, one space, a
// target of visible ASCII, one space and HTTP/1.0 or HTTP/1.1 exactly; origin-form and
// absolute-form (http and https), no CONNECT and no "*"; exactly one Host field of
// host characters on HTTP/1.1 (at most one on 1.0); a head within MaxHeaderBytes (431
// beyond). A refused request gets 400 (431, 417, 505) and the connection closes.
// TestRequestSmuggling records each case against net/http's server, and FuzzRequest checks
// that whatever this server serves, net/http's serves the same way. net/http serves more,
// which this server refuses on purpose: bare LF line ends in the head and the trailers,
// obs-fold (it unfolds, Content-Length too), Content-Length with Transfer-Encoding (it lets
// Transfer-Encoding win), Transfer-Encoding on HTTP/1.0 (it ignores it), chunk-size lines
// from 1 to 4 KiB, NUL in chunk extensions, folded trailers, HTTP/1.2, CONNECT, "*" as the
// target of any method, and heads of more than 512 fields.
//
// # Not done
//
// Only http and https URLs, HTTP/1.1 on the wire (ALPN offers http/1.1 alone), no proxy,
// no redirect, no compression, no cookies. The URL's userinfo is not sent (net/http turns it
// into an Authorization field), and no User-Agent is added (net/http adds
// Go-http-client/1.1 when the request has none). Expect: 100-continue is the caller's field:
// the body is sent at once, and the 100 is skipped.
package h1
