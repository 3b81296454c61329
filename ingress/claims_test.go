package ingress

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func TestCircuitClaimsDecode(t *testing.T) {
	cases := []struct {
		name    string
		in      string
		id      string
		exp     int64 // 0 = absent
		expBad  bool
		aud     bool
		wantErr bool
	}{
		{"fixture shape", `{"id":"c1","endpoint_id":"e","exp":4102444800}`, "c1", 4102444800, false, false, false},
		{"blank space everywhere", " {\n \"id\" : \"c1\" ,\t\"exp\" : 10.75 } ", "c1", 10, false, false, false},
		{"keys are case-sensitive", `{"ID":"c1","Exp":"x","AUD":"a"}`, "", 0, false, false, false},
		{"escaped key", `{"\u0069d":"c1"}`, "c1", 0, false, false, false},
		{"escaped value", `{"id":"c\u0031"}`, "c1", 0, false, false, false},
		{"later duplicate wins", `{"id":"c1","id":"c2"}`, "c2", 0, false, false, false},
		{"non-string id clears", `{"id":"c1","id":7}`, "", 0, false, false, false},
		{"nested values skipped", `{"x":{"id":"no","y":[1,{"z":"}"}]},"id":"c1","s":"a\"b"}`, "c1", 0, false, false, false},
		{"aud null still present", `{"aud":null}`, "", 0, false, true, false},
		{"aud empty list present", `{"aud":[]}`, "", 0, false, true, false},
		{"exp null is a bad type", `{"exp":null}`, "", 0, true, false, false},
		{"exp string is a bad type", `{"exp":"1"}`, "", 0, true, false, false},
		{"exp bool is a bad type", `{"exp":true}`, "", 0, true, false, false},
		{"exp zero is 1970", `{"exp":0}`, "", 0, false, false, false},
		{"empty object", `{}`, "", 0, false, false, false},
		{"null document", `null`, "", 0, false, false, false},
		{"array document", `[1]`, "", 0, false, false, true},
		{"string document", `"id"`, "", 0, false, false, true},
		{"huge exp", `{"exp":1e400}`, "", 0, false, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var c circuitClaims
			err := json.Unmarshal([]byte(tc.in), &c)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			exp, expErr := c.GetExpirationTime()
			if c.id != tc.id || c.hasAud != tc.aud || (expErr != nil) != tc.expBad {
				t.Fatalf("got id %q aud %v exp err %v", c.id, c.hasAud, expErr)
			}
			switch {
			case tc.exp != 0 && (exp == nil || exp.Unix() != tc.exp):
				t.Fatalf("exp = %v, want %d", exp, tc.exp)
			case tc.name == "exp zero is 1970" && (exp == nil || !exp.Equal(time.Unix(0, 0))):
				t.Fatalf("exp 0 = %v, want the epoch", exp)
			}
		})
	}
}

// FuzzClaims holds the hand-written claims scanner to encoding/json's reading of the same
// bytes through jwt.MapClaims, the decoder it replaced.
func FuzzClaims(f *testing.F) {
	for _, s := range []string{
		`{"id":"3f1c0c8e-6b2a-4b8e-9a51-0d2f5e7c9a10","exp":4102444800}`, `{"\u0069d":"x","aud":null}`,
		`{"x":[{"y":"]}"}],"nbf":1.5,"iat":-3}`, `{"exp":"soon"}`, `null`, `[]`, `{"id":"\xff"}`, `{"exp":0}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var c circuitClaims
		if !json.Valid(data) {
			_ = c.UnmarshalJSON(data) // must not panic on anything
			return
		}
		var m jwt.MapClaims
		errM := json.Unmarshal(data, &m)
		errC := json.Unmarshal(data, &c)
		if (errM == nil) != (errC == nil) {
			// A document that is null decodes to no claims either way.
			t.Fatalf("MapClaims err %v, circuitClaims err %v for %q", errM, errC, data)
		}
		if errM != nil {
			return
		}
		wantID, _ := m["id"].(string)
		_, wantAud := m["aud"]
		if c.id != wantID || c.hasAud != wantAud {
			t.Fatalf("%q: id %q aud %v, want id %q aud %v", data, c.id, c.hasAud, wantID, wantAud)
		}
		for _, k := range []struct {
			name string
			mine func() (*jwt.NumericDate, error)
			want func() (*jwt.NumericDate, error)
		}{
			{"exp", c.GetExpirationTime, m.GetExpirationTime},
			{"nbf", c.GetNotBefore, m.GetNotBefore},
			{"iat", c.GetIssuedAt, m.GetIssuedAt},
		} {
			got, gotErr := k.mine()
			want, wantErr := k.want()
			if (gotErr != nil) != (wantErr != nil) {
				t.Fatalf("%q: %s err %v, want %v", data, k.name, gotErr, wantErr)
			}
			// MapClaims reads 0 as "absent"; here it is the epoch (exp 0 = expired).
			if want == nil && got != nil && m[k.name] == 0.0 {
				continue
			}
			if (got == nil) != (want == nil) || got != nil && !got.Equal(want.Time) {
				t.Fatalf("%q: %s = %v, want %v", data, k.name, got, want)
			}
		}
	})
}
