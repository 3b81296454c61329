package cache

import (
	"encoding/binary"
	"errors"
	"net/http"
	"time"
)

// An entry travels to a shared store as a few length-prefixed fields and the body as it is:
//
//	version (1 byte) | flags (1 byte: 1 = stream) | stored (8 bytes, Unix nanoseconds, big
//	endian) | header values (uvarint count, then per value: name and value, each a uvarint
//	length and its bytes) | body (the rest)
//
// It measured faster than msgpack (BenchmarkEncode, BenchmarkDecode) and needs no reflection.
// What a store hands back is untrusted: decode checks every length against what is left,
// so a damaged entry is an error, never a panic or an allocation it did not pay for.

const encodingVersion = 1

// maxHeaderValues bounds the header values of an entry: an answer keeps a handful.
const maxHeaderValues = 64

var errDamaged = errors.New("cache entry is damaged")

// encode appends e's encoding to b.
func encode(b []byte, e *Entry) []byte {
	var flags byte
	if e.Stream {
		flags = 1
	}
	b = append(b, encodingVersion, flags)
	b = binary.BigEndian.AppendUint64(b, uint64(e.Stored.UnixNano()))
	n := 0
	for _, values := range e.Header {
		n += len(values)
	}
	b = binary.AppendUvarint(b, uint64(min(n, maxHeaderValues)))
	n = 0
	for name, values := range e.Header {
		for _, v := range values {
			if n++; n > maxHeaderValues {
				break
			}
			b = appendString(appendString(b, name), v)
		}
	}
	return append(b, e.Body...)
}

// decode reads an encoded entry. The entry's body is a slice of b.
func decode(b []byte) (*Entry, error) {
	if len(b) < 10 || b[0] != encodingVersion || b[1] > 1 {
		return nil, errDamaged
	}
	e := &Entry{Stream: b[1] == 1, Stored: time.Unix(0, int64(binary.BigEndian.Uint64(b[2:10])))}
	b = b[10:]
	n, k := binary.Uvarint(b)
	if k <= 0 || n > maxHeaderValues {
		return nil, errDamaged
	}
	b = b[k:]
	if n > 0 {
		e.Header = make(http.Header, n)
	}
	for range n {
		var name, value string
		var ok bool
		if name, b, ok = readString(b); !ok {
			return nil, errDamaged
		}
		if value, b, ok = readString(b); !ok {
			return nil, errDamaged
		}
		e.Header[name] = append(e.Header[name], value)
	}
	e.Body = b
	return e, nil
}

// readString reads a uvarint length and that many bytes.
func readString(b []byte) (string, []byte, bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return "", nil, false
	}
	end := k + int(n)
	return string(b[k:end]), b[end:], true
}
