package protocol

import (
	"bytes"
	"reflect"
	"testing"
)

// Frames as the Rust crate writes them (serde field order, compact), from the protocol
// walkthrough. Each must decode and re-encode to the same bytes.
var workerFrames = []string{
	`{"type":"register","worker_name":"gpu-box-1","models":["llama3-8b"],"max_concurrent":4,"protocol_version":"2026-04-bridge-v1","current_load":0}`,
	`{"type":"register","worker_name":"gpu-box-a","models":["gpt-oss-120b"],"max_concurrent":2}`,
	`{"type":"models_update","models":["llama3-8b","codellama-13b"],"current_load":1}`,
	`{"type":"models_update","models":[],"current_load":0}`,
	`{"type":"response_chunk","request_id":"r-002","chunk":"data: {\"choices\":[]}\n\n"}`,
	`{"type":"response_complete","request_id":"r-001","status_code":200,"headers":{"content-type":"application/json"},"body":"{\"choices\":[]}","token_counts":{"prompt_tokens":42,"completion_tokens":128,"total_tokens":170}}`,
	`{"type":"response_complete","request_id":"r-002","status_code":200}`,
	`{"type":"response_complete","request_id":"r-003","status_code":499,"body":""}`,
	`{"type":"pong","current_load":1,"timestamp_unix_ms":1712345678901}`,
	`{"type":"pong","current_load":0}`,
	`{"type":"error","request_id":"req-42","code":"upstream_error","message":"worker backend disconnected"}`,
	`{"type":"error","code":"internal","message":"no request"}`,
}

var serverFrames = []string{
	`{"type":"register_ack","worker_id":"worker-1","models":["llama3-8b"],"protocol_version":"2026-04-bridge-v1"}`,
	`{"type":"register_ack","worker_id":"worker-123","models":["gpt-oss-120b","llama-4"],"warnings":["duplicate model dropped"]}`,
	`{"type":"register_ack","worker_id":"worker-2","models":[],"warnings":["worker registered without any routable models"]}`,
	`{"type":"request","request_id":"req-42","model":"gpt-oss-120b","endpoint_path":"/v1/chat/completions","is_streaming":true,"body":"{\"model\":\"gpt-oss-120b\",\"stream\":true}","headers":{"authorization":"Bearer token","x-trace-id":"trace-123"}}`,
	`{"type":"request","request_id":"r-001","model":"llama3-8b","endpoint_path":"/v1/chat/completions","is_streaming":false,"body":"{}"}`,
	`{"type":"cancel","request_id":"r-002","reason":"client_disconnect"}`,
	`{"type":"cancel","request_id":"r-003","reason":"timeout"}`,
	`{"type":"cancel","request_id":"r","reason":"graceful_shutdown"}`,
	`{"type":"cancel","request_id":"r","reason":"worker_disconnect"}`,
	`{"type":"cancel","request_id":"r","reason":"requeue_exhausted"}`,
	`{"type":"cancel","request_id":"r","reason":"server_shutdown"}`,
	`{"type":"cancel","request_id":"r","reason":{"other":"stream exceeded size limit"}}`,
	`{"type":"ping","timestamp_unix_ms":1712345678901}`,
	`{"type":"ping"}`,
	`{"type":"graceful_shutdown","reason":"maintenance","drain_timeout_secs":30}`,
	`{"type":"graceful_shutdown"}`,
	`{"type":"models_refresh","reason":"periodic"}`,
	`{"type":"models_refresh"}`,
}

func TestFramesRoundTripByteForByte(t *testing.T) {
	check := func(t *testing.T, frame string, decode func([]byte) (Message, error)) {
		msg, err := decode([]byte(frame))
		if err != nil {
			t.Fatalf("decode %s: %v", frame, err)
		}
		out, err := Marshal(msg)
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != frame {
			t.Errorf("round trip changed the frame\n got %s\nwant %s", out, frame)
		}
	}
	for _, f := range workerFrames {
		check(t, f, DecodeWorkerMessage)
	}
	for _, f := range serverFrames {
		check(t, f, DecodeServerMessage)
	}
}

func TestDecodeIgnoresUnknownFieldsAndOrder(t *testing.T) {
	msg, err := DecodeWorkerMessage([]byte(`{"current_load":3,"future":{"x":1},"models":["a"],"type":"models_update"}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := (ModelsUpdate{Models: []string{"a"}, CurrentLoad: 3}); !reflect.DeepEqual(msg, want) {
		t.Fatalf("got %#v", msg)
	}
}

func TestNilListsEncodeAsEmptyArrays(t *testing.T) {
	// Rust rejects null for a Vec, so an empty model list must be [].
	out, _ := Marshal(ModelsUpdate{})
	if string(out) != `{"type":"models_update","models":[],"current_load":0}` {
		t.Fatalf("got %s", out)
	}
	out, _ = Marshal(Ping{})
	if string(out) != `{"type":"ping"}` {
		t.Fatalf("got %s", out)
	}
}

func TestDecodeRejects(t *testing.T) {
	cases := map[string]string{
		"not json":                 `nope`,
		"array":                    `[1,2]`,
		"no type":                  `{"request_id":"x"}`,
		"unknown type":             `{"type":"telepathy"}`,
		"server type from worker":  `{"type":"request","request_id":"x"}`,
		"chunk without id":         `{"type":"response_chunk","chunk":"x"}`,
		"chunk without chunk":      `{"type":"response_chunk","request_id":"x"}`,
		"complete without status":  `{"type":"response_complete","request_id":"x"}`,
		"complete wrong type":      `{"type":"response_complete","request_id":"x","status_code":"200"}`,
		"register models not list": `{"type":"register","worker_name":"w","models":"a","max_concurrent":1}`,
		"negative load":            `{"type":"pong","current_load":-1}`,
	}
	for name, frame := range cases {
		if _, err := DecodeWorkerMessage([]byte(frame)); err == nil {
			t.Errorf("%s: %s decoded without error", name, frame)
		}
	}
	if _, err := DecodeServerMessage([]byte(`{"type":"cancel","request_id":"r","reason":{"bogus":1}}`)); err == nil {
		t.Error("bad cancel reason decoded")
	}
}

func TestCancelReasonForms(t *testing.T) {
	for _, r := range []CancelReason{CancelClientDisconnect, CancelTimeout, CancelGracefulShutdown,
		CancelWorkerDisconnect, CancelRequeueExhausted, CancelServerShutdown, "custom text"} {
		b, err := r.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var back CancelReason
		if err := back.UnmarshalJSON(b); err != nil || back != r {
			t.Errorf("%q -> %s -> %q (%v)", r, b, back, err)
		}
	}
	if b, _ := CancelReason("x").MarshalJSON(); !bytes.Equal(b, []byte(`{"other":"x"}`)) {
		t.Errorf("other form: %s", b)
	}
}

// FuzzDecodeWorkerMessage: no input panics, and whatever decodes re-encodes to a fixed point.
func FuzzDecodeWorkerMessage(f *testing.F) {
	for _, s := range workerFrames {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzFixedPoint(t, data, DecodeWorkerMessage)
	})
}

func FuzzDecodeServerMessage(f *testing.F) {
	for _, s := range serverFrames {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzFixedPoint(t, data, DecodeServerMessage)
	})
}

func fuzzFixedPoint(t *testing.T, data []byte, decode func([]byte) (Message, error)) {
	msg, err := decode(data)
	if err != nil {
		return
	}
	once, err := Marshal(msg)
	if err != nil {
		t.Fatalf("decoded %q but cannot encode %#v: %v", data, msg, err)
	}
	again, err := decode(once)
	if err != nil {
		t.Fatalf("re-decode of %s: %v", once, err)
	}
	twice, _ := Marshal(again)
	if !bytes.Equal(once, twice) {
		t.Fatalf("not a fixed point:\n%s\n%s", once, twice)
	}
}
