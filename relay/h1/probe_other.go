//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package h1

import "syscall"

// probe has no non-blocking peek on this platform: a connection leaving the pool is taken as
// alive, and a dead one is found by the request (and retried when the request allows it).
type probe struct{}

func (p *probe) init(syscall.Conn) {}

func (p *probe) alive() bool { return true }

// gone cannot tell: a client that left is found by the next write.
func (p *probe) gone() bool { return false }
