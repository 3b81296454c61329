package h1

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// ok starts an answer.
const ok = "HTTP/1.1 200 OK\r\n"

// long is n bytes of filler.
func long(n int) string { return strings.Repeat("x", n) }

// smuggling are answers whose framing or syntax two parsers could read two ways. They seed
// FuzzResponse too.
var smuggling = []struct {
	name, raw string
	method    string // "" = GET
	netHTTP   bool   // net/http accepts it
}{
	// Content-Length
	{name: "two different Content-Length", raw: ok + "Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!"},
	{name: "Content-Length list", raw: ok + "Content-Length: 5, 5\r\n\r\nhello"},
	{name: "negative Content-Length", raw: ok + "Content-Length: -1\r\n\r\n"},
	{name: "signed Content-Length", raw: ok + "Content-Length: +5\r\n\r\nhello"},
	{name: "hex Content-Length", raw: ok + "Content-Length: 0x5\r\n\r\nhello"},
	{name: "empty Content-Length", raw: ok + "Content-Length:\r\n\r\n"},
	{name: "Content-Length overflowing int64", raw: ok + "Content-Length: 9223372036854775808\r\n\r\n"},
	{name: "Content-Length with inner space", raw: ok + "Content-Length: 1 2\r\n\r\n"},
	{name: "different Content-Length on a HEAD answer", method: http.MethodHead,
		raw: ok + "Content-Length: 1\r\nContent-Length: 2\r\n\r\n"},
	// Content-Length with Transfer-Encoding
	{name: "CL then TE", netHTTP: true,
		raw: ok + "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"},
	{name: "TE then CL", netHTTP: true,
		raw: ok + "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n5\r\nhello\r\n0\r\n\r\n"},
	{name: "CL and TE on a 304", netHTTP: true,
		raw: "HTTP/1.1 304 Not Modified\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"},
	// Transfer-Encoding
	{name: "TE gzip", raw: ok + "Transfer-Encoding: gzip\r\n\r\nxx"},
	{name: "TE gzip, chunked", raw: ok + "Transfer-Encoding: gzip, chunked\r\n\r\n2\r\nxx\r\n0\r\n\r\n"},
	{name: "TE chunked not final", raw: ok + "Transfer-Encoding: chunked, gzip\r\n\r\n2\r\nxx\r\n0\r\n\r\n"},
	{name: "TE identity", raw: ok + "Transfer-Encoding: identity\r\n\r\nxx"},
	{name: "TE twice", raw: ok + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
	{name: "TE in a list field", raw: ok + "Transfer-Encoding: chunked,\r\n\r\n0\r\n\r\n"},
	{name: "TE on HTTP/1.0", netHTTP: true,
		raw: "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"},
	{name: "TE with a Unicode lookalike", raw: ok + "Transfer-Encoding: \u017fhunked\r\n\r\n0\r\n\r\n"},
	{name: "Trailer announcing Content-Length",
		raw: ok + "Trailer: Content-Length\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nContent-Length: 5\r\n\r\n"},
	// Line ends
	{name: "bare LF after the status line", netHTTP: true, raw: "HTTP/1.1 200 OK\nContent-Length: 2\r\n\r\nok"},
	{name: "bare LF after a field", netHTTP: true, raw: ok + "Content-Length: 2\n\r\nok"},
	{name: "bare LF ending the head", netHTTP: true, raw: ok + "Content-Length: 2\r\n\nok"},
	{name: "bare LF everywhere", netHTTP: true, raw: "HTTP/1.1 200 OK\nContent-Length: 2\n\nok"},
	{name: "bare CR in a field", raw: ok + "X-A: 1\rContent-Length: 2\r\n\r\nok"},
	{name: "bare LF after a chunk size", raw: ok + "Transfer-Encoding: chunked\r\n\r\n2\nok\r\n0\r\n\r\n"},
	{name: "bare LF after chunk data", raw: ok + "Transfer-Encoding: chunked\r\n\r\n2\r\nok\n0\r\n\r\n"},
	{name: "bare LF after the last chunk", raw: ok + "Transfer-Encoding: chunked\r\n\r\n0\n\r\n"},
	{name: "bare LF in the trailers",
		raw: ok + "Transfer-Encoding: chunked\r\n\r\n0\r\nX-T: 1\n\r\n"},
	{name: "chunk data longer than its size", raw: ok + "Transfer-Encoding: chunked\r\n\r\n2\r\nokay\r\n0\r\n\r\n"},
	// Field syntax
	{name: "obs-fold", netHTTP: true, raw: ok + "X-A: 1\r\n 2\r\nContent-Length: 0\r\n\r\n"},
	{name: "obs-fold of Content-Length", netHTTP: true, raw: ok + "Content-Length: 2\r\n\t\r\n\r\nok"},
	{name: "space before the colon", netHTTP: true, raw: ok + "Content-Length : 2\r\n\r\nok"},
	{name: "space in a name", netHTTP: true, raw: ok + "Content Length: 2\r\nContent-Length: 2\r\n\r\nok"},
	{name: "leading space on the first field", raw: ok + " Content-Length: 2\r\n\r\nok"},
	{name: "no colon", raw: ok + "Content-Length 2\r\n\r\nok"},
	{name: "empty name", raw: ok + ": 2\r\n\r\nok"},
	{name: "NUL in a value", raw: ok + "X-A: a\x00b\r\nContent-Length: 0\r\n\r\n"},
	{name: "non-ASCII name", raw: ok + "X-\xc3\xa9: 1\r\nContent-Length: 0\r\n\r\n"},
	// Chunk sizes and extensions
	{name: "chunk size over 16 digits", raw: ok + "Transfer-Encoding: chunked\r\n\r\n00000000000000002\r\nok\r\n0\r\n\r\n"},
	{name: "chunk size overflowing int64", netHTTP: false,
		raw: ok + "Transfer-Encoding: chunked\r\n\r\n8000000000000000\r\nok\r\n0\r\n\r\n"},
	{name: "chunk size line over 1 KiB", netHTTP: true,
		raw: ok + "Transfer-Encoding: chunked\r\n\r\n2;" + long(2000) + "\r\nok\r\n0\r\n\r\n"},
	{name: "chunk size line over 4 KiB", raw: ok + "Transfer-Encoding: chunked\r\n\r\n2;" + long(5000) + "\r\nok\r\n0\r\n\r\n"},
	{name: "negative chunk size", raw: ok + "Transfer-Encoding: chunked\r\n\r\n-2\r\nok\r\n0\r\n\r\n"},
	{name: "empty chunk size", raw: ok + "Transfer-Encoding: chunked\r\n\r\n\r\nok\r\n0\r\n\r\n"},
	{name: "0x chunk size", raw: ok + "Transfer-Encoding: chunked\r\n\r\n0x2\r\nok\r\n0\r\n\r\n"},
	{name: "space before a chunk extension", raw: ok + "Transfer-Encoding: chunked\r\n\r\n2 ;a\r\nok\r\n0\r\n\r\n"},
	{name: "NUL in a chunk extension", netHTTP: true, raw: ok + "Transfer-Encoding: chunked\r\n\r\n2;a\x00\r\nok\r\n0\r\n\r\n"},
	{name: "DEL in a chunk extension", netHTTP: true, raw: ok + "Transfer-Encoding: chunked\r\n\r\n2;\x7f\r\nok\r\n0\r\n\r\n"},
	{name: "bare CR in a chunk extension", raw: ok + "Transfer-Encoding: chunked\r\n\r\n2;a\rb\r\nok\r\n0\r\n\r\n"},
	{name: "trailer section over 4 KiB",
		raw: ok + "Transfer-Encoding: chunked\r\n\r\n0\r\nX-T: " + long(5000) + "\r\n\r\n"},
	{name: "folded trailer", netHTTP: true, raw: ok + "Transfer-Encoding: chunked\r\n\r\n0\r\nX-T: 1\r\n 2\r\n\r\n"},
	// Status lines
	{name: "two-digit status", raw: "HTTP/1.1 20 OK\r\nContent-Length: 0\r\n\r\n"},
	{name: "status below 100", netHTTP: true, raw: "HTTP/1.1 099 Odd\r\nContent-Length: 0\r\n\r\n"},
	{name: "signed status", netHTTP: true, raw: "HTTP/1.1 +20 OK\r\nContent-Length: 0\r\n\r\n"},
	{name: "HTTP/2.0 status line", netHTTP: true, raw: "HTTP/2.0 200 OK\r\nContent-Length: 0\r\n\r\n"},
	{name: "HTTP/0.9", netHTTP: true, raw: "HTTP/0.9 200 OK\r\nContent-Length: 0\r\n\r\n"},
	{name: "lower-case protocol", raw: "http/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"},
	{name: "double space", netHTTP: true, raw: "HTTP/1.1  200 OK\r\nContent-Length: 0\r\n\r\n"},
	{name: "no space before the reason", raw: "HTTP/1.1 200OK\r\nContent-Length: 0\r\n\r\n"},
	{name: "control byte in the reason", netHTTP: true, raw: "HTTP/1.1 200 O\x00K\r\nContent-Length: 0\r\n\r\n"},
	{name: "CR in the reason", netHTTP: true, raw: "HTTP/1.1 200 O\rK\r\nContent-Length: 0\r\n\r\n"},
	{name: "101 we did not ask for", netHTTP: true, raw: "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n"},
	{name: "empty line before the status", raw: "\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"},
	// Size
	{name: "head over 64 KiB", netHTTP: true,
		raw: ok + strings.Repeat("X-Pad: "+long(1000)+"\r\n", 70) + "Content-Length: 0\r\n\r\n"},
	{name: "more than 512 fields", netHTTP: true,
		raw: ok + strings.Repeat("X-A: 1\r\n", 600) + "Content-Length: 0\r\n\r\n"},
	{name: "interim answers over 64 KiB", netHTTP: true,
		raw: strings.Repeat("HTTP/1.1 103 Early Hints\r\nLink: "+long(1000)+"\r\n\r\n", 70) + ok + "Content-Length: 0\r\n\r\n"},
}

// TestSmuggling: each smuggling answer is refused as malformed, whatever net/http makes of
// it. The netHTTP column records what net/http does (checked, so the table stays true): the
// cases where it says true are where the two differ on purpose.
func TestSmuggling(t *testing.T) {
	for _, tc := range smuggling {
		t.Run(tc.name, func(t *testing.T) {
			method := tc.method
			if method == "" {
				method = http.MethodGet
			}
			p, err := parseAnswer(strings.NewReader(tc.raw), method)
			if !isMalformed(err) {
				t.Fatalf("%s: %+v, %v; want a malformed-response error", describeAnswer(tc.raw), p, err)
			}
			if _, err := parseWithNetHTTP([]byte(tc.raw), method); (err == nil) != tc.netHTTP {
				t.Errorf("net/http accepts it: %v, the table says %v (update doc.go too)", err == nil, tc.netHTTP)
			}
		})
	}
}

// TestUnboundedInput: an upstream that never stops sending a head, a chunk line or trailers is
// refused after a bounded read, whatever it sends.
func TestUnboundedInput(t *testing.T) {
	for name, stream := range map[string]func(w io.Writer){
		"header fields": func(w io.Writer) {
			io.WriteString(w, "HTTP/1.1 200 OK\r\n")
			for {
				if _, err := io.WriteString(w, "X-Again: and again\r\n"); err != nil {
					return
				}
			}
		},
		"one header line": func(w io.Writer) {
			io.WriteString(w, "HTTP/1.1 200 OK\r\nX-Long: ")
			for {
				if _, err := io.WriteString(w, "aaaaaaaaaaaaaaaa"); err != nil {
					return
				}
			}
		},
		"interim answers": func(w io.Writer) {
			for {
				if _, err := io.WriteString(w, "HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
					return
				}
			}
		},
		"chunk size line": func(w io.Writer) {
			io.WriteString(w, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0000")
			for {
				if _, err := io.WriteString(w, "0000000000000000"); err != nil {
					return
				}
			}
		},
		"trailers": func(w io.Writer) {
			io.WriteString(w, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n")
			for {
				if _, err := io.WriteString(w, "X-T: t\r\n"); err != nil {
					return
				}
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			pr, pw := io.Pipe()
			go func() {
				stream(pw)
			}()
			defer pr.CloseWithError(io.ErrClosedPipe)
			counted := &countingReader{r: pr}
			_, err := parseAnswer(counted, http.MethodGet)
			if !isMalformed(err) {
				t.Fatalf("%v: want a malformed-response error", err)
			}
			if counted.n > maxHeadBytes+8<<10 {
				t.Fatalf("read %d bytes before refusing", counted.n)
			}
		})
	}
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}
