package h1

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

// parsed is one answer as a client sees it, whichever parser read it.
type parsed struct {
	status    int
	header    http.Header
	length    int64
	body      string
	keepAlive bool
}

// parseAnswer reads one answer from r as Do does: interim heads skipped, the final head, then
// the body to its end.
func parseAnswer(r io.Reader, method string) (parsed, error) {
	hr := headReader{br: newReader(r)}
	h, err := hr.read(method)
	if err != nil {
		return parsed{}, err
	}
	kind, length, keepAlive := h.frame(method)
	var rs response // the values' backing Do gives: a head of more fields takes the other path
	p := parsed{status: h.status, header: hr.header(&h, rs.values[:]), length: length, keepAlive: keepAlive}
	var b body
	b.start(hr.br, nil, kind, length)
	data, err := io.ReadAll(&b)
	p.body = string(data)
	return p, err
}

// parseWithNetHTTP reads the same answer with net/http's parser, skipping interim answers as
// its Transport does.
func parseWithNetHTTP(raw []byte, method string) (parsed, error) {
	br := bufio.NewReader(bytes.NewReader(raw))
	for {
		resp, err := http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			return parsed{}, err
		}
		if resp.StatusCode/100 == 1 && resp.StatusCode != http.StatusSwitchingProtocols {
			continue
		}
		data, err := io.ReadAll(resp.Body)
		return parsed{status: resp.StatusCode, header: resp.Header, length: resp.ContentLength,
			body: string(data), keepAlive: !resp.Close}, err
	}
}

// agree checks what the fuzz target checks, on one input: our parser accepts only what
// net/http's accepts, and reads it the same way. The fields net/http rewrites are left out of
// the comparison (see doc.go): it deletes Connection when it says close, and adds
// Cache-Control: no-cache after Pragma: no-cache.
func agree(t testing.TB, raw []byte, method string) (ok bool) {
	t.Helper()
	ours, err := parseAnswer(bytes.NewReader(raw), method)
	// How the bytes arrive must not change the outcome: the chunked reader's look-ahead and
	// lines split across reads take other paths when they come one at a time.
	slow, slowErr := parseAnswer(iotest.OneByteReader(bytes.NewReader(raw)), method)
	if (err == nil) != (slowErr == nil) || err == nil && !samePiece(ours, slow) {
		t.Fatalf("read at once: %+v, %v\nread byte by byte: %+v, %v", ours, err, slow, slowErr)
	}
	if err != nil {
		return false
	}
	theirs, terr := parseWithNetHTTP(raw, method)
	if terr != nil {
		t.Fatalf("accepted what net/http refuses (%v): %q", terr, raw)
	}
	delete(theirs.header, "Connection")
	delete(ours.header, "Connection")
	if ours.header.Get("Cache-Control") == "" {
		delete(theirs.header, "Cache-Control")
	}
	if ours.keepAlive && !theirs.keepAlive {
		t.Fatalf("we keep a connection net/http closes: %q", raw)
	}
	ours.keepAlive, theirs.keepAlive = false, false
	if !samePiece(ours, theirs) {
		t.Fatalf("read differently:\nours     %+v\nnet/http %+v\ninput %q", ours, theirs, raw)
	}
	return true
}

func samePiece(a, b parsed) bool {
	return a.status == b.status && a.length == b.length && a.body == b.body && a.keepAlive == b.keepAlive &&
		maps.EqualFunc(a.header, b.header, slices.Equal)
}

// wellFormed are answers every reader must take the same way. They seed FuzzResponse too.
var wellFormed = []string{
	"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"ok\":true}",
	"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n" +
		"e\r\ndata: {\"a\":1}\n\r\n6\r\ndata: \r\nC\r\n[DONE]\n\n\n\n\n\n\r\n0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n3;ext=\"q v\"\r\nabc\r\n0\r\nX-Sum: 9\r\n\r\n",
	"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.0 200 OK\r\nServer: old\r\n\r\nbody until close",
	"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 204 No Content\r\nX-A: 1\r\nx-a: 2\r\n\r\n",
	"HTTP/1.1 304 Not Modified\r\nContent-Length: 99\r\nETag: \"v\"\r\n\r\n",
	"HTTP/1.1 200\r\nContent-Length: 1\r\n\r\nx",
	"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 3\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nslow!",
	"HTTP/1.1 500 \r\nX-Empty:\r\nX-Tab:\tv\t\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nPragma: no-cache\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 502 Bad Gateway\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n1\r\nb\r\n0\r\n\r\n",
}

func TestWellFormedAnswersAgree(t *testing.T) {
	for _, raw := range wellFormed {
		for _, method := range []string{http.MethodGet, http.MethodHead} {
			if !agree(t, []byte(raw), method) {
				_, err := parseAnswer(strings.NewReader(raw), method)
				t.Errorf("%s %q refused: %v", method, raw, err)
			}
		}
	}
}

// TestChunkedReadsAhead: the end of a chunked body is seen as soon as it is buffered, with the
// last data; one Read returns every buffered chunk; and a stream's event is returned without
// waiting for the next.
func TestChunkedReadsAhead(t *testing.T) {
	raw := "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
	var b body
	b.start(newReader(strings.NewReader(raw)), nil, chunkedBody, -1)
	buf := make([]byte, 64)
	n, err := b.Read(buf)
	if string(buf[:n]) != "abcde" || err != io.EOF {
		t.Fatalf("Read: %q, %v; want every chunk and io.EOF at once", buf[:n], err)
	}

	pr, pw := io.Pipe()
	defer pr.Close()
	go func() {
		io.WriteString(pw, "6\r\nevent1\r\n")
		io.WriteString(pw, "6\r\nevent2\r\n0\r\n\r\n")
		pw.Close()
	}()
	b = body{}
	b.start(newReader(pr), nil, chunkedBody, -1)
	if n, err := b.Read(buf); string(buf[:n]) != "event1" || err != nil {
		t.Fatalf("first Read: %q, %v; want the first event alone", buf[:n], err)
	}
	if rest, err := io.ReadAll(&b); string(rest) != "event2" || err != nil {
		t.Fatalf("rest: %q, %v", rest, err)
	}
}

func TestChunkOverheadBudget(t *testing.T) {
	ext := ";" + strings.Repeat("e", 900)
	raw := strings.Repeat("1"+ext+"\r\nx\r\n", 20) + "0\r\n\r\n"
	var b body
	b.start(newReader(strings.NewReader(raw)), nil, chunkedBody, -1)
	if _, err := io.ReadAll(&b); !isMalformed(err) {
		t.Fatalf("%v: 18 KB of framing for 20 bytes of data accepted", err)
	}
	// One byte per chunk, the way a slow stream may legitimately come, is fine.
	raw = strings.Repeat("1\r\nx\r\n", 10000) + "0\r\n\r\n"
	b = body{}
	b.start(newReader(strings.NewReader(raw)), nil, chunkedBody, -1)
	if data, err := io.ReadAll(&b); err != nil || len(data) != 10000 {
		t.Fatalf("%d bytes, %v", len(data), err)
	}
}

func TestParseLength(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "007": 7, "9223372036854775807": 1<<63 - 1} {
		if n, ok := parseLength([]byte(in)); !ok || n != want {
			t.Errorf("%q: %d %v", in, n, ok)
		}
	}
	for _, in := range []string{"", "-1", "+1", "1 ", "1,1", "0x1", "9223372036854775808", "99999999999999999999"} {
		if _, ok := parseLength([]byte(in)); ok {
			t.Errorf("%q accepted", in)
		}
	}
}

func TestCanonicalize(t *testing.T) {
	for in, want := range map[string]string{"content-type": "Content-Type", "X-REQUEST-ID": "X-Request-Id",
		"etag": "Etag", "x_y-1z": "X_y-1z", "www-authenticate": "Www-Authenticate"} {
		b := []byte(in)
		canonicalize(b)
		if string(b) != want || want != http.CanonicalHeaderKey(in) {
			t.Errorf("%q: %q, want %q (net/http: %q)", in, b, want, http.CanonicalHeaderKey(in))
		}
	}
}

func TestHeaderAllocations(t *testing.T) {
	raw := "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nDate: Mon, 01 Jan 2024 00:00:00 GMT\r\n" +
		"Server: uvicorn\r\nX-Request-Id: 42\r\nContent-Length: 0\r\n\r\n"
	r := strings.NewReader(raw)
	hr := headReader{br: newReader(r)}
	var values [5]string
	for _, c := range []struct {
		values []string
		want   float64
	}{
		// The map (with its one group of slots) and the string every name and value is cut
		// from; the values in the caller's array (Do's is in the answer's own allocation).
		{values[:], 3},
		// A backing too short for every field: the values' shared array is one more.
		{values[:4], 4},
	} {
		allocs := testing.AllocsPerRun(100, func() {
			r.Reset(raw)
			h, err := hr.read(http.MethodGet)
			if err != nil {
				t.Fatal(err)
			}
			hr.header(&h, c.values)
		})
		if allocs > c.want {
			t.Fatalf("%v allocations per head of 5 fields with room for %d values, want %v",
				allocs, len(c.values), c.want)
		}
	}
}

func isMalformed(err error) bool { return errors.Is(err, ErrMalformed) }

func describeAnswer(raw string) string {
	if len(raw) > 60 {
		return fmt.Sprintf("%q...", raw[:60])
	}
	return fmt.Sprintf("%q", raw)
}
