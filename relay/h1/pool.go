package h1

import (
	"time"
)

// poolKey names the upstream a connection belongs to: the URL's host as written and whether
// it speaks TLS. (Two spellings of one host get two pools; nothing goes wrong for it.)
type poolKey struct {
	host string
	tls  bool
}

// hostPool is the idle connections to one upstream, oldest first. Taking the newest (LIFO)
// keeps the busy set small and lets the surplus age out; bounded, the oldest goes first.
//
// No goroutine watches an idle connection. Liveness is checked when one is taken (see
// probe), and one timer per pool closes connections idle longer than IdleTimeout, so a
// pool of an upstream that went away empties and leaves the map.
type hostPool struct {
	idle  []*conn
	sweep *time.Timer
}

// recentIdle is how long a connection may have been idle and still be taken for a Replayable
// request without the liveness peek. An upstream rarely closes a connection within moments of
// answering on it, and when it does, the request goes again on a fresh connection (Do's
// retry); an unasked write (a timeout notice) comes at the end of an idle timeout, seconds
// long. Under load connections rest for microseconds, and the peek was one system call in
// seven per request.
const recentIdle = time.Second

// get takes the newest idle connection to key that is still usable, or returns nil. A
// connection idle longer than recentIdle, or taken for a request that cannot be sent again, is
// peeked at first.
func (c *Client) get(key poolKey, replayable bool) *conn {
	for {
		c.mu.Lock()
		hp := c.pools[key]
		if hp == nil || len(hp.idle) == 0 {
			c.mu.Unlock()
			return nil
		}
		cn := hp.idle[len(hp.idle)-1]
		hp.idle[len(hp.idle)-1] = nil
		hp.idle = hp.idle[:len(hp.idle)-1]
		c.mu.Unlock()
		idle := c.clock().Sub(cn.idleSince)
		if idle < c.idleTimeout() && (replayable && idle < recentIdle || cn.alive()) {
			cn.reused = true
			return cn
		}
		cn.close()
	}
}

// put makes a connection idle, or closes it when its pool is full.
func (c *Client) put(cn *conn) {
	limit := c.maxIdle()
	if limit <= 0 {
		cn.close()
		return
	}
	cn.idleSince = c.clock()
	var evicted *conn
	c.mu.Lock()
	if c.pools == nil {
		c.pools = make(map[poolKey]*hostPool)
	}
	hp := c.pools[cn.key]
	if hp == nil {
		hp = &hostPool{}
		c.pools[cn.key] = hp
		key := cn.key
		hp.sweep = time.AfterFunc(c.idleTimeout(), func() { c.sweep(key, hp) })
	}
	if len(hp.idle) >= limit {
		evicted = hp.idle[0]
		copy(hp.idle, hp.idle[1:])
		hp.idle[len(hp.idle)-1] = nil
		hp.idle = hp.idle[:len(hp.idle)-1]
	}
	hp.idle = append(hp.idle, cn)
	c.mu.Unlock()
	if evicted != nil {
		evicted.close()
	}
}

// sweep closes the connections of one pool idle longer than IdleTimeout. A pool left empty
// leaves the map; otherwise the timer is set for when the oldest remaining one expires.
func (c *Client) sweep(key poolKey, hp *hostPool) {
	now, timeout := c.clock(), c.idleTimeout()
	c.mu.Lock()
	if c.pools[key] != hp { // CloseIdle, or an earlier sweep, already let it go
		c.mu.Unlock()
		return
	}
	cut := 0
	for cut < len(hp.idle) && now.Sub(hp.idle[cut].idleSince) >= timeout {
		cut++
	}
	expired := make([]*conn, cut)
	copy(expired, hp.idle[:cut])
	n := copy(hp.idle, hp.idle[cut:])
	clear(hp.idle[n:])
	hp.idle = hp.idle[:n]
	if len(hp.idle) == 0 {
		delete(c.pools, key)
	} else {
		hp.sweep.Reset(hp.idle[0].idleSince.Add(timeout).Sub(now))
	}
	c.mu.Unlock()
	for _, cn := range expired {
		cn.close()
	}
}

// CloseIdle closes every idle connection. Connections in use are not affected: they are
// pooled again, or closed, when their request is done.
func (c *Client) CloseIdle() {
	c.mu.Lock()
	pools := c.pools
	c.pools = nil
	c.mu.Unlock()
	for _, hp := range pools {
		hp.sweep.Stop()
		for _, cn := range hp.idle {
			cn.close()
		}
	}
}
