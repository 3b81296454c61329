package protocol

import (
	"strings"
)

// The headers field of request and response frames carries end-to-end headers only. Which
// headers those are is decided here, for the server and the worker daemon alike.

// hopByHop are the headers that describe one connection, not the message (RFC 9110 7.6.1),
// plus host and content-length, which belong to each hop.
var hopByHop = [...]string{
	"connection", "keep-alive", "proxy-connection", "proxy-authenticate", "proxy-authorization",
	"te", "trailer", "transfer-encoding", "upgrade", "host", "content-length",
}

// EndToEnd reports whether the header called name (any case) may cross the relay, given the
// names the message's Connection header lists (from ConnectionListed). It does not allocate.
func EndToEnd(name string, connectionListed map[string]bool) bool {
	for _, h := range hopByHop {
		if len(h) == len(name) && strings.EqualFold(h, name) {
			return false
		}
	}
	if len(name) >= 6 && strings.EqualFold(name[:6], "proxy-") {
		return false
	}
	return len(connectionListed) == 0 || !connectionListed[strings.ToLower(name)]
}

// ConnectionListed returns the lowercased header names that Connection values list.
func ConnectionListed(values []string) map[string]bool {
	var listed map[string]bool
	for _, v := range values {
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				if listed == nil {
					listed = make(map[string]bool)
				}
				listed[strings.ToLower(name)] = true
			}
		}
	}
	return listed
}
