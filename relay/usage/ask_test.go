package usage

import (
	"encoding/json"
	"maps"
	"reflect"
	"testing"
)

func TestAskForUsage(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string
		asked            bool
	}{
		{"absent", `{"model":"m","stream":true,"messages":[]}`,
			`{"model":"m","stream":true,"messages":[],"stream_options":{"include_usage":true}}`, false},
		{"empty object", `{}`, `{"stream_options":{"include_usage":true}}`, false},
		{"other options", `{"model":"m","stream_options":{"continuous_usage_stats":true},"stream":true}`,
			`{"model":"m","stream_options":{"continuous_usage_stats":true,"include_usage":true},"stream":true}`, false},
		{"empty options", `{"stream_options":{ },"stream":true}`,
			`{"stream_options":{"include_usage":true },"stream":true}`, false},
		{"false", `{"stream":true,"stream_options":{"include_usage":false,"continuous_usage_stats":true}}`,
			`{"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}}`, false},
		{"true", `{"stream":true,"stream_options":{"include_usage":true}}`,
			`{"stream":true,"stream_options":{"include_usage":true}}`, true},
		{"null options", `{"stream":true,"stream_options":null}`,
			`{"stream":true,"stream_options":{"include_usage":true}}`, false},
		{"null include", `{"stream_options": {"include_usage": null}}`,
			`{"stream_options": {"include_usage": true}}`, false},
		{"pretty", "{\n  \"model\": \"m\",\n  \"stream\": true,\n  \"messages\": [\n    {\"role\": \"user\", \"content\": \"hi\"}\n  ]\n}\n",
			"{\n  \"model\": \"m\",\n  \"stream\": true,\n  \"messages\": [\n    {\"role\": \"user\", \"content\": \"hi\"}\n  ],\"stream_options\":{\"include_usage\":true}\n}\n", false},
		{"pretty options", "{\n  \"stream_options\" : {\n    \"include_usage\" : false\n  }\n}",
			"{\n  \"stream_options\" : {\n    \"include_usage\" : true\n  }\n}", false},
		{"pretty true", " {\"stream_options\" :\t{ \"include_usage\" : true } } ",
			" {\"stream_options\" :\t{ \"include_usage\" : true } } ", true},
		{"escaped key", `{"stream\u005foptions":{"include\u005fusage":true}}`,
			`{"stream\u005foptions":{"include\u005fusage":true}}`, true},
		{"last duplicate wins", `{"stream_options":{"include_usage":true},"stream_options":{"include_usage":false}}`,
			`{"stream_options":{"include_usage":true},"stream_options":{"include_usage":true}}`, false},
		{"array", `[1,2]`, `[1,2]`, true},
		{"string", `"x"`, `"x"`, true},
		{"empty", ``, ``, true},
		{"cut off", `{"stream":true,`, `{"stream":true,`, true},
		{"trailing", `{"stream":true} x`, `{"stream":true} x`, true},
		{"two objects", `{}{}`, `{}{}`, true},
	} {
		out, asked := AskForUsage([]byte(tc.body))
		if string(out) != tc.want || asked != tc.asked {
			t.Errorf("%s: %q %v, want %q %v", tc.name, out, asked, tc.want, tc.asked)
		}
		checkAsked(t, []byte(tc.body), out)
	}
}

// TestAskForUsageUnchanged: when the client asked, out is body itself.
func TestAskForUsageUnchanged(t *testing.T) {
	for _, body := range []string{`{"stream_options":{"include_usage":true}}`, `nope`} {
		b := []byte(body)
		out, asked := AskForUsage(b)
		if !asked || &out[0] != &b[0] || len(out) != len(b) {
			t.Errorf("%s: not body itself", body)
		}
	}
}

// checkAsked: if body is a JSON object, out is one too, with stream_options.include_usage
// true and every other member, and every other stream_options member, equal to body's.
func checkAsked(t *testing.T, body, out []byte) {
	t.Helper()
	var in map[string]any
	if json.Unmarshal(body, &in) != nil || in == nil {
		if string(out) != string(body) {
			t.Fatalf("%q: not an object, changed to %q", body, out)
		}
		return
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%q gave %q: %v", body, out, err)
	}
	opts, ok := got["stream_options"].(map[string]any)
	if !ok || opts["include_usage"] != true {
		t.Fatalf("%q gave %q: include_usage not true", body, out)
	}
	wantOpts, _ := in["stream_options"].(map[string]any)
	wantOpts = maps.Clone(wantOpts)
	if wantOpts == nil {
		wantOpts = map[string]any{}
	}
	wantOpts["include_usage"] = true
	in["stream_options"] = wantOpts
	if !reflect.DeepEqual(got, in) {
		t.Fatalf("%q gave %q: other members changed", body, out)
	}
}
