package relay

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMetaSink(t *testing.T) {
	body := `{"id":"x","choices":[]}`
	for _, tc := range []struct {
		name   string
		answer answerOf
		want   []string
		meta   bool // the body that passed has x_pool_meta
	}{
		{name: "a whole JSON answer gets x_pool_meta",
			answer: answerOf{status: 200, header: http.Header{"Content-Type": {"application/json; charset=utf-8"},
				"Content-Length": {"23"}, "X-Backend": {"vllm"}}, length: 23, chunks: []string{body[:5], body[5:]}},
			want: []string{"head 200 89", "chunk len=89 false", "end"}, meta: true},
		{name: "an encoded answer passes",
			answer: answerOf{status: 200, header: http.Header{"Content-Type": {"application/json"}, "Content-Encoding": {"gzip"}},
				length: 3, chunks: []string{"abc"}},
			want: []string{"head 200 3", `chunk "abc" false`, "end"}},
		{name: "a failure passes",
			answer: answerOf{status: 400, header: jsonHead, length: 2, chunks: []string{"{}"}},
			want:   []string{"head 400 2", `chunk "{}" false`, "end"}},
		{name: "a stream passes",
			answer: answerOf{status: 200, header: sseHead, length: -1, chunks: []string{"data: {}\n\n"}, stream: true},
			want:   []string{"head 200 -1", `chunk "data: {}\n\n" true`, "end"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r recorder
			m := metaSink{where: &servedBy{target: "gpu-1", queued: 20 * time.Millisecond}, arrival: time.Now()}
			if err := tc.answer.into(m.wrap(&r)); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(r.got, tc.want) {
				t.Fatalf("passed %q, want %q", r.got, tc.want)
			}
			if !tc.meta {
				return
			}
			var got struct {
				ID   string `json:"id"`
				Meta struct {
					Target  string `json:"target"`
					QueueMS int64  `json:"queue_ms"`
				} `json:"x_pool_meta"`
			}
			if err := json.Unmarshal(r.body, &got); err != nil || got.ID != "x" || got.Meta.Target != "gpu-1" || got.Meta.QueueMS != 20 {
				t.Fatalf("body %s (%v)", r.body, err)
			}
			h := r.header
			if h.Get("Content-Type") != "application/json" || h.Get("X-Backend") != "vllm" || h.Get("Content-Length") != "" {
				t.Fatalf("head %v", h)
			}
		})
	}
}

// TestMetaSinkTooLarge: an answer over the bound goes on as the target sent it.
func TestMetaSinkTooLarge(t *testing.T) {
	var r recorder
	m := metaSink{where: &servedBy{}, arrival: time.Now()}
	half := strings.Repeat("x", maxTranslatedBody/2+1)
	a := answerOf{status: 200, header: jsonHead, length: int64(2 * len(half)), chunks: []string{half, half}}
	if err := a.into(m.wrap(&r)); err != nil {
		t.Fatal(err)
	}
	want := []string{"head 200 -1", "chunk len=16777217 false", "chunk len=16777217 false", "end"}
	if !slices.Equal(r.got, want) || len(r.body) != 2*len(half) {
		t.Fatalf("passed %q, want %q", r.got, want)
	}
}
