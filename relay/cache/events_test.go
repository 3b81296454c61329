package cache

import (
	"slices"
	"testing"
)

func TestComplete(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream string
		want   bool
	}{
		{"OpenAI ends in [DONE]", "data: {\"choices\":[]}\n\ndata: [DONE]\n\n", true},
		{"[DONE] without a space or a blank line", "data: {}\n\ndata:[DONE]", true},
		{"CRLF lines", "data: {}\r\n\r\ndata: [DONE]\r\n\r\n", true},
		{"OpenAI cut before [DONE]", "data: {\"choices\":[]}\n\n", false},
		{"OpenAI ended by the relay's error event", "data: {}\n\ndata: {\"error\":{\"message\":\"cut\"}}\n\n", false},
		{"[DONE] followed by more", "data: [DONE]\n\ndata: {}\n\n", false},
		{"Anthropic ends in message_stop", "event: message_delta\ndata: {}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", true},
		{"Anthropic cut after message_delta", "event: message_delta\ndata: {\"type\":\"message_delta\"}\n\n", false},
		{"Anthropic ended by an error event", "event: message_start\ndata: {}\n\nevent: error\ndata: {\"type\":\"error\"}\n\n", false},
		{"message_stop named by its data alone", "data: {\"type\":\"message_stop\"}\n\n", true},
		{"Responses ends in response.completed", "event: response.output_text.delta\ndata: {}\n\nevent: response.completed\ndata: {\"type\":\"response.completed\"}\n\n", true},
		{"Responses named by its data alone", "data: {\"type\":\"response.completed\",\"response\":{}}\n\n", true},
		{"Responses failed", "event: response.failed\ndata: {\"type\":\"response.failed\"}\n\n", false},
		{"the event name wins over the data's type", "event: error\ndata: {\"type\":\"message_stop\"}\n\n", false},
		{"a type that is not a string", "data: {\"type\":1}\n\n", false},
		{"data that is not JSON", "data: {\"type\":\"message_stop\"\n\n", false},
		{"[DONE] across two data lines", "data: [DO\ndata: NE]\n\n", false},
		{"trailing blank lines", "data: [DONE]\n\n\n\n", true},
		{"empty", "", false},
	} {
		if got := Complete([]byte(tc.stream)); got != tc.want {
			t.Errorf("%s: Complete = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestEvents(t *testing.T) {
	for _, tc := range []struct {
		stream string
		want   []string
	}{
		{"data: a\n\ndata: b\n\n", []string{"data: a\n\n", "data: b\n\n"}},
		{"event: x\ndata: a\r\n\r\ndata: b", []string{"event: x\ndata: a\r\n\r\n", "data: b"}},
		{"data: a\n\r\ndata: b\r\n\n", []string{"data: a\n\r\n", "data: b\r\n\n"}},
		{"data: a\n", []string{"data: a\n"}},
		{"", nil},
	} {
		var got []string
		for ev := range Events([]byte(tc.stream)) {
			got = append(got, string(ev))
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("Events(%q) = %q, want %q", tc.stream, got, tc.want)
		}
	}
}

// FuzzEvents: the events of any bytes put back together are those bytes, each ends at its
// first blank line, and Complete reads any of them without failing.
func FuzzEvents(f *testing.F) {
	f.Add([]byte("data: {}\n\ndata: [DONE]\n\n"))
	f.Add([]byte("event: message_stop\r\ndata: {\"type\":\"message_stop\"}\r\n\r\n"))
	f.Add([]byte("data: {\"type\":\"response.completed\",\"x\":[1,{\"y\":\"\\u0041\"}]}\n\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var joined []byte
		for ev := range Events(b) {
			if len(ev) == 0 {
				t.Fatal("an empty event")
			}
			if n := eventLen(ev); n != len(ev) {
				t.Fatalf("event %q ends at %d", ev, n)
			}
			joined = append(joined, ev...)
		}
		if string(joined) != string(b) {
			t.Fatalf("events of %q join to %q", b, joined)
		}
		Complete(b)
	})
}
