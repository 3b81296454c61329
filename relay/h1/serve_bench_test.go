package h1

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkServe measures a server's own work per request: one keep-alive loopback
// connection carries an inference-shaped POST (about 100 bytes of JSON) to a handler that reads
// the body and answers 1 KB with Content-Type and Content-Length. The client writes pre-built
// bytes and discards the answer by its Content-Length, and the handler sets pre-built header
// values, so that neither allocates per request: allocs/op is the server's.
func BenchmarkServe(b *testing.B) {
	reqBody := `{"model":"m","messages":[{"role":"user","content":"Say hello in one short sentence."}]}` + "\n"
	raw := []byte("POST /v1/chat/completions HTTP/1.1\r\nHost: relay.example\r\n" +
		"Content-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(reqBody)) + "\r\n" +
		"User-Agent: bench/1.0\r\n\r\n" + reqBody)
	answer := []byte(`{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":` +
		`{"role":"assistant","content":"` + strings.Repeat("x", 900) + `"},"finish_reason":"stop"}]}`)
	contentType := []string{"application/json"}
	contentLength := []string{strconv.Itoa(len(answer))}
	buf := make([]byte, 512) // one request at a time: one buffer serves them all
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := 0
		for {
			k, err := r.Body.Read(buf)
			n += k
			if err == io.EOF {
				break
			}
			if err != nil {
				panic(err)
			}
		}
		if n != len(reqBody) {
			panic("short body")
		}
		h := w.Header()
		h["Content-Type"] = contentType
		h["Content-Length"] = contentLength
		w.Write(answer)
	})
	b.Run("lean", func(b *testing.B) {
		_, addr := startLean(b, handler)
		benchServe(b, addr, raw, len(answer))
	})
	b.Run("net-http", func(b *testing.B) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		s := &http.Server{Handler: handler}
		go s.Serve(ln)
		defer s.Close()
		benchServe(b, ln.Addr().String(), raw, len(answer))
	})
}

// benchServe sends raw b.N times on one connection, reading each answer's head and dropping
// its body by Content-Length, which must be want.
func benchServe(b *testing.B, addr string, raw []byte, want int) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	br := bufio.NewReaderSize(nc, 16<<10)
	exchange := func() {
		if _, err := nc.Write(raw); err != nil {
			b.Fatal(err)
		}
		length := -1
		for first := true; ; first = false {
			line, err := br.ReadSlice('\n')
			if err != nil {
				b.Fatal(err)
			}
			if first && !bytes.HasPrefix(line, []byte("HTTP/1.1 200 ")) {
				b.Fatalf("status line %q", line)
			}
			if len(line) == 2 {
				break
			}
			if v, ok := bytes.CutPrefix(line, []byte("Content-Length: ")); ok {
				length = 0
				for _, c := range bytes.TrimSpace(v) {
					length = length*10 + int(c-'0')
				}
			}
		}
		if length != want {
			b.Fatalf("Content-Length %d; want %d", length, want)
		}
		if _, err := br.Discard(length); err != nil {
			b.Fatal(err)
		}
	}
	for range 10 { // the connection and the pools warm
		exchange()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		exchange()
	}
}
