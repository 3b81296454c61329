package cache

import (
	"bytes"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

func sampleEntry(body string, stream bool) *Entry {
	return &Entry{
		Header: http.Header{"Content-Type": {"text/event-stream"}, "X-Modelrelay-Model": {"m"},
			"X-Modelrelay-Translated": {"openai->anthropic"}},
		Body: []byte(body), Stream: stream, Stored: time.Unix(1700000000, 123456789),
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	for _, e := range []*Entry{
		sampleEntry("data: {}\n\ndata: [DONE]\n\n", true),
		{Body: []byte(`{"id":"x"}`), Stored: time.Unix(0, 1)},
		{Header: http.Header{"A": {"1", "2"}}, Stored: time.Unix(5, 0)},
	} {
		got, err := decode(encode(nil, e))
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if !reflect.DeepEqual(got.Header, e.Header) || !bytes.Equal(got.Body, e.Body) || got.Stream != e.Stream ||
			!got.Stored.Equal(e.Stored) {
			t.Fatalf("decoded %+v, want %+v", got, e)
		}
	}
}

// TestDecodeDamaged: every cut of an encoding, and a few lies, are errors.
func TestDecodeDamaged(t *testing.T) {
	enc := encode(nil, sampleEntry("", false))
	headerEnd := len(enc) // an empty body: every shorter cut loses part of a header
	for n := range headerEnd {
		if _, err := decode(enc[:n]); err == nil {
			t.Errorf("a cut at %d of %d decoded", n, headerEnd)
		}
	}
	for _, b := range [][]byte{
		append([]byte{2}, enc[1:]...),                   // another version
		append([]byte{1, 7}, enc[2:]...),                // unknown flags
		append(bytes.Clone(enc[:10]), 0xff, 0xff, 0x7f), // a count far past the bound
	} {
		if _, err := decode(b); err == nil {
			t.Errorf("%q decoded", b)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(encode(nil, sampleEntry("data: [DONE]\n\n", true)))
	f.Add(encode(nil, &Entry{}))
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := decode(b)
		if err != nil {
			return
		}
		// What decoded encodes to what decodes the same.
		again, err := decode(encode(nil, e))
		if err != nil || !reflect.DeepEqual(again.Header, e.Header) || !bytes.Equal(again.Body, e.Body) {
			t.Fatalf("re-encoding %q: %+v, %v", b, again, err)
		}
	})
}

// msgpackEntry is Entry as msgpack would carry it: the alternative the encoding was measured
// against.
type msgpackEntry struct {
	Header map[string][]string `msgpack:"h"`
	Body   []byte              `msgpack:"b"`
	Stream bool                `msgpack:"s"`
	Stored int64               `msgpack:"t"`
}

func BenchmarkEncode(b *testing.B) {
	e := sampleEntry(strings.Repeat("x", 4096), false)
	b.Run("length-prefixed", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf = encode(buf[:0], e)
		}
	})
	b.Run("msgpack", func(b *testing.B) {
		b.ReportAllocs()
		m := msgpackEntry{Header: e.Header, Body: e.Body, Stream: e.Stream, Stored: e.Stored.UnixNano()}
		for b.Loop() {
			if _, err := msgpack.Marshal(&m); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkDecode(b *testing.B) {
	e := sampleEntry(strings.Repeat("x", 4096), false)
	b.Run("length-prefixed", func(b *testing.B) {
		b.ReportAllocs()
		enc := encode(nil, e)
		for b.Loop() {
			if _, err := decode(enc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("msgpack", func(b *testing.B) {
		b.ReportAllocs()
		enc, _ := msgpack.Marshal(&msgpackEntry{Header: e.Header, Body: e.Body, Stream: e.Stream, Stored: e.Stored.UnixNano()})
		for b.Loop() {
			var m msgpackEntry
			if err := msgpack.Unmarshal(enc, &m); err != nil {
				b.Fatal(err)
			}
		}
	})
}
