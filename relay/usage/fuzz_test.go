package usage

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzTap: no input panics a tap; Stream mode passes on exactly its input; the counts and the
// output do not depend on how the input is cut into Writes; the buffers stay in their bounds;
// and StreamStrip changes nothing in a stream without "usage". The corpus holds the samples.
func FuzzTap(f *testing.F) {
	for i, s := range samples {
		f.Add([]byte(s.body), uint(len(s.body)/2+i), uint8(s.mode))
	}
	var whole, cut, steps Tap
	f.Fuzz(func(t *testing.T, data []byte, split uint, mode uint8) {
		m := Mode(mode % 3)
		wantOut, want := runTap(&whole, m, data)
		i := int(split % uint(len(data)+1))
		if out, c := runChecked(t, &cut, m, data[:i], data[i:]); c != want || !bytes.Equal(out, wantOut) {
			t.Fatalf("cut at %d: %+v %q, whole: %+v %q", i, c, out, want, wantOut)
		}
		step := 1 + int(split%61)
		if len(data) > 4096 {
			step = 1 + int(split%4093)
		}
		if out, c := runChecked(t, &steps, m, pieces(data, step)...); c != want || !bytes.Equal(out, wantOut) {
			t.Fatalf("in pieces of %d: %+v %q, whole: %+v %q", step, c, out, want, wantOut)
		}
		if (m != StreamStrip || !bytes.Contains(data, usageKey)) && !bytes.Equal(wantOut, data) {
			t.Fatalf("mode %d changed the answer: %q", m, wantOut)
		}
		if m == StreamStrip {
			if _, c := runTap(&whole, Stream, data); c != want {
				t.Fatalf("StreamStrip counts %+v, Stream %+v", want, c)
			}
		}
		if i, j := indexUsage(data), bytes.Index(data, usageKey); i != j {
			t.Fatalf("indexUsage %d, bytes.Index %d", i, j)
		}
		if i, j := lastIndexUsage(data), bytes.LastIndex(data, usageKey); i != j {
			t.Fatalf("lastIndexUsage %d, bytes.LastIndex %d", i, j)
		}
	})
}

// runChecked is runTap, checking the tap's buffers after every call.
func runChecked(t *testing.T, tap *Tap, m Mode, pieces ...[]byte) ([]byte, Counts) {
	tap.Reset(m)
	var out []byte
	largest := 0
	for _, p := range pieces {
		out = append(out, tap.Write(p)...)
		largest = max(largest, len(p))
		checkBounds(t, tap, largest)
	}
	out = append(out, tap.Close()...)
	checkBounds(t, tap, largest)
	return out, tap.Counts()
}

func checkBounds(t *testing.T, tap *Tap, largest int) {
	t.Helper()
	for _, b := range []struct {
		name     string
		cap, max int
	}{
		{"held", cap(tap.held), maxEvent},
		{"join", cap(tap.join), maxEvent},
		{"data", cap(tap.data), maxEvent},
		{"edit", cap(tap.edit), 2 * maxEvent},
		{"tail", cap(tap.tail.buf), maxTail},
		{"out", cap(tap.out.buf), 4 * (maxEvent + largest)},
	} {
		if b.cap > b.max {
			t.Fatalf("%s buffer grew to %d, past %d", b.name, b.cap, b.max)
		}
	}
}

// FuzzAskForUsage: no body panics AskForUsage; a JSON object comes out as one with
// stream_options.include_usage true and every other member as it was; anything else comes
// out unchanged; and the scanner agrees with encoding/json on what a JSON object is.
func FuzzAskForUsage(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","stream":true,"stream_options":{"continuous_usage_stats":true}}`,
		`{"stream_options":{"include_usage":false}}`,
		`{"stream_options":{"include_usage":true}}`,
		"{\n  \"stream_options\": null\n}\n",
		`[{"stream_options":{}}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		out, _ := AskForUsage(body)
		checkAsked(t, body, out)
		_, ok := readTop(body)
		isObj := json.Valid(body) && bytes.TrimLeft(body, " \t\r\n")[0] == '{'
		if ok != isObj {
			t.Fatalf("%q: the scanner says object %v, encoding/json %v", body, ok, isObj)
		}
	})
}
