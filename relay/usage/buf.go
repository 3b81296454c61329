package usage

// grow returns b with room for n bytes in all (not more than limit, which callers never need
// to pass): buffers grow by doubling but never past their bound, so that a pooled Tap holds
// no more than the bounds it documents.
func grow(b []byte, n, limit int) []byte {
	if n <= cap(b) {
		return b
	}
	c := min(max(2*cap(b), n, 512), max(limit, n))
	nb := make([]byte, len(b), c)
	copy(nb, b)
	return nb
}

// appendBounded appends p to b, growing it no further than limit (len(b)+len(p) <= limit).
func appendBounded(b, p []byte, limit int) []byte {
	return append(grow(b, len(b)+len(p), limit), p...)
}
