package translate

// chain is two translations in a row: a's output is b's input.
type chain struct {
	a, b Stream
	out  []byte
}

// Chain composes two streams: what a writes is what b reads. It carries a Responses client to
// a target that speaks only Anthropic Messages: Anthropic events -> chat chunks (a, asked
// for its usage chunk) -> Responses events (b). Usage is b's, or a's while b has none. Close
// closes a and feeds b what a closed with, then closes b; Fail fails b alone (a's client
// is b).
func Chain(a, b Stream) Stream { return &chain{a: a, b: b} }

func (c *chain) Write(p []byte) ([]byte, error) {
	mid, err := c.a.Write(p)
	out, errB := c.b.Write(mid)
	if err == nil {
		err = errB
	}
	return out, err
}

func (c *chain) Close() []byte {
	out, err := c.b.Write(c.a.Close())
	c.out = append(c.out[:0], out...) // b's Close reuses the buffer out lies in
	if err != nil {
		return append(c.out, c.b.Fail(err.Error())...)
	}
	return append(c.out, c.b.Close()...)
}

func (c *chain) Fail(message string) []byte { return c.b.Fail(message) }

func (c *chain) Usage() Usage {
	if u := c.b.Usage(); u != (Usage{}) {
		return u
	}
	return c.a.Usage()
}
