// Package h1test serves raw connections for the benchmarks of the upstream client and of the
// request path: a listener on loopback whose connections a given function answers byte for
// byte, with nothing of net/http's in between, so a benchmark's allocations are the client's.
package h1test

import (
	"bufio"
	"bytes"
	"net"
	"strconv"
	"sync"
	"testing"
)

// Serve listens on a loopback port and answers each connection with serve on its own
// goroutine; at the test's cleanup the listener and every connection are closed and the
// goroutines waited for. It returns the address (host:port).
func Serve(tb testing.TB, serve func(net.Conn)) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = true
			mu.Unlock()
			wg.Go(func() { serve(c) })
		}
	})
	tb.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// ReadRequest reads one request from br: its head, and the Content-Length body after it, which
// it drops. marked says whether the request line contains mark; ok is false once the
// connection ends or breaks. It allocates nothing, so a benchmark's allocations stay the
// client's.
func ReadRequest(br *bufio.Reader, mark []byte) (marked, ok bool) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return false, false
	}
	marked = bytes.Contains(line, mark)
	length := 0
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return false, false
		}
		if len(line) <= 2 {
			break
		}
		if len(line) > 16 && bytes.EqualFold(line[:15], []byte("content-length:")) {
			length, _ = strconv.Atoi(string(bytes.TrimSpace(line[15:])))
		}
	}
	if _, err := br.Discard(length); err != nil {
		return false, false
	}
	return marked, true
}
