package protocol

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestModelList(t *testing.T) {
	b, _ := json.Marshal(NewModelList([]string{"a", "b"}))
	if want := `{"object":"list","data":[{"id":"a","object":"model","owned_by":"worker-proxy"},{"id":"b","object":"model","owned_by":"worker-proxy"}]}`; string(b) != want {
		t.Fatalf("got %s", b)
	}
	ids, err := DecodeModelIDs(strings.NewReader(`{"object":"list","data":[{"id":" q "},{"id":""},{"id":"l"},{"id":"q"}],"x":1}`), 1<<10)
	if err != nil || !slices.Equal(ids, []string{"q", "l"}) {
		t.Fatalf("got %v %v", ids, err)
	}
	if _, err := DecodeModelIDs(strings.NewReader(`<html>`), 1<<10); err == nil {
		t.Fatal("HTML accepted as a model list")
	}
	if empty, err := DecodeModelIDs(strings.NewReader(`{"data":[]}`), 1<<10); err != nil || len(empty) != 0 {
		t.Fatalf("empty list: %v %v", empty, err)
	}
}
