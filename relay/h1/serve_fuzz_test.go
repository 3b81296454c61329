package h1

import "testing"

// wellFormedRequests are requests of the shapes the relay's clients send: SDKs posting JSON
// with a Content-Length, uploads sent chunked, keep-alive and pipelined requests, HTTP/1.0.
var wellFormedRequests = []string{
	post11 + "Content-Type: application/json\r\nAuthorization: Bearer sk-x\r\nContent-Length: 17\r\n\r\n{\"model\":\"llama\"}",
	post11 + "Transfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n",
	post11 + "Expect: 100-continue\r\nContent-Length: 2\r\n\r\nok",
	get11 + "\r\n" + get11 + "Connection: close\r\n\r\n",
	"GET http://relay/v1/models?x=1 HTTP/1.1\r\nHost: relay\r\n\r\n",
	"GET /v1/models HTTP/1.0\r\n\r\n",
	"POST /v1/messages HTTP/1.0\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nhi" + get11 + "\r\n",
	post11 + "Content-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
	get11 + "X-Many: 1\r\nX-Many: 2\r\nx-lower: v \t\r\nAccept-Encoding: gzip, br\r\n\r\n",
}

// FuzzRequest: whatever this server serves, net/http's server serves too and its handler
// reads the same way (method, target, URL, Host, protocol, fields, length, transfer coding,
// Connection: close, body), request by request; this server may stop sooner. Where net/http
// serves more, we refuse on purpose (doc.go lists the cases; TestRequestSmuggling pins each).
// The corpus in testdata/fuzz/FuzzRequest holds requests of the relay's clients and every
// smuggling case.
func FuzzRequest(f *testing.F) {
	for _, raw := range wellFormedRequests {
		f.Add([]byte(raw))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		ours, theirs := startBoth(t).run(t, raw)
		agreeServed(t, raw, ours, theirs)
	})
}
