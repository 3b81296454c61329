package main

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Circuit tokens without "exp" are accepted forever by default (PyJWT and the stock worker do
// so); appproxy.require_token_exp refuses them with the usual 401.
func TestE2ERequireTokenExp(t *testing.T) {
	t.Parallel()
	for _, require := range []bool{false, true} {
		rep := newReplica(t, "r", "m")
		c := newCircuit("exp", route{port: rep.port()})
		env := map[string]string{}
		if require {
			env["APPPROXY_REQUIRE_TOKEN_EXP"] = "true"
		}
		e := startE2E(t, e2eOptions{circuits: jsonList(c.json()), env: env})
		noExp := mintToken(t, jwt.MapClaims{"id": c.id}, e2eJWTSecret)
		withExp := mintToken(t, jwt.MapClaims{"id": c.id, "exp": time.Now().Add(time.Hour).Unix()}, e2eJWTSecret)
		e.waitServing(circuitHost("exp"), bearer(withExp))
		st, h, body := e.chat(circuitHost("exp"), "m", bearer(noExp))
		if !require {
			if st != http.StatusOK {
				t.Errorf("default: token without exp got %d %s", st, body)
			}
			continue
		}
		checkProblem(t, "require_token_exp", st, h, body, problemWant{401, "invalid-credentials",
			`E20008: Invalid authorization token (Token is missing the "exp" claim)`})
	}
}

func jsonList(items ...[]byte) []json.RawMessage {
	out := make([]json.RawMessage, len(items))
	for i, b := range items {
		out[i] = b
	}
	return out
}
