package main

// AppProxy mode, aggregation hosts (the bare apex and aggregation_hosts): routing by the body's model
// over the circuits the caller may use, /v1/models there, and models the caller may not use
// answered like unknown ones.

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func TestE2EAggregationHosts(t *testing.T) {
	t.Parallel()
	rPub, rPriv := newReplica(t, "pub", "pub-model"), newReplica(t, "priv", "priv-model")
	rIP, rIPT := newReplica(t, "ip", "ip-model"), newReplica(t, "ipt", "ipt-model")
	rA, rB := newReplica(t, "shared-a", "shared-model"), newReplica(t, "shared-b", "shared-model")

	pub := newCircuit("pub", route{port: rPub.port()})
	pub.public = true
	priv := newCircuit("priv", route{port: rPriv.port()})
	ipPub := newCircuit("ip", route{port: rIP.port()})
	ipPub.public, ipPub.allowIPs = true, ptr("10.1.2.3")
	ipPriv := newCircuit("ipt", route{port: rIPT.port()})
	ipPriv.allowIPs = ptr("10.1.2.3")
	sharedPub := newCircuit("shared-a", route{port: rA.port()})
	sharedPub.public = true
	sharedPriv := newCircuit("shared-b", route{port: rB.port()})
	all := []circuitSpec{pub, priv, ipPub, ipPriv, sharedPub, sharedPriv}
	var raws []json.RawMessage
	for _, c := range all {
		raws = append(raws, c.json())
	}
	e := startE2E(t, e2eOptions{circuits: raws})
	eventually(t, 15*time.Second, "every circuit's models discovered", func() (bool, string) {
		views := e.adminCircuits()
		n := 0
		for _, v := range views {
			if ms, _ := v["models"].([]any); len(ms) > 0 {
				n++
			}
		}
		js, _ := json.Marshal(views)
		return n == len(all), string(js)
	})

	tokPriv, tokIPT, tokSharedPriv := tokenFor(t, priv.id), tokenFor(t, ipPriv.id), tokenFor(t, sharedPriv.id)
	badKey := mintToken(t, jwt.MapClaims{"id": priv.id}, "not-the-secret")
	for _, host := range []string{e2eApex, e2eAggHost, "MODELS.test:443", "" /* the relay's own host */} {
		models := func(h http.Header) []string {
			st, _, body := e.do("GET", host, "/v1/models", h, nil)
			var list struct {
				Data []struct {
					ID string `json:"id"`
				} `json:"data"`
			}
			if st != 200 || json.Unmarshal(body, &list) != nil {
				t.Errorf("%s /v1/models: %d %s", host, st, body)
			}
			var ids []string
			for _, d := range list.Data {
				ids = append(ids, d.ID)
			}
			slices.Sort(ids)
			return ids
		}
		for _, tc := range []struct {
			name string
			h    http.Header
			want []string
		}{
			{"no token", nil, []string{"pub-model", "shared-model"}},
			{"invalid token", bearer(badKey), []string{"pub-model", "shared-model"}},
			{"token of priv", bearer(tokPriv), []string{"priv-model", "pub-model", "shared-model"}},
			{"token of an allow-listed circuit", bearer(tokIPT), []string{"pub-model", "shared-model"}},
			{"token of shared-b", bearer(tokSharedPriv), []string{"pub-model", "shared-model"}},
		} {
			if got := models(tc.h); !slices.Equal(got, tc.want) {
				t.Errorf("%s /v1/models, %s: %v, want %v", host, tc.name, got, tc.want)
			}
		}

		routed := []struct {
			name, model string
			h           http.Header
			replica     string
		}{
			{"public model, no token", "pub-model", nil, "pub"},
			{"public model, invalid token counts as none", "pub-model", bearer(badKey), "pub"},
			{"private model, its token", "priv-model", bearer(tokPriv), "priv"},
		}
		for _, tc := range routed {
			st, h, body := e.chat(host, tc.model, tc.h)
			if st != 200 || h.Get("X-Replica") != tc.replica {
				t.Errorf("%s %s: %s", host, tc.name, st2s(st, h.Get("X-Replica"), body))
			}
		}
		if seen, ok := rPriv.lastRequest("POST", "/v1/chat/completions"); !ok || seen.Header.Get("Authorization") != "Bearer "+tokPriv {
			t.Errorf("%s: the token did not reach the private circuit's replica unchanged", host)
		}

		// A model the caller may not use is answered exactly like one nobody serves, so the
		// aggregation host reveals no private model names.
		unknownSt, _, unknownBody := e.chat(host, "no-such-model", nil)
		if unknownSt != http.StatusNotFound {
			t.Fatalf("%s: unknown model: %d %s", host, unknownSt, unknownBody)
		}
		denied := []struct {
			name, model string
			h           http.Header
		}{
			{"private model, no token", "priv-model", nil},
			{"private model, another circuit's token", "priv-model", bearer(tokSharedPriv)},
			{"private model, bad signature", "priv-model", bearer(badKey)},
			{"public model behind an allow-list", "ip-model", nil},
			{"private model behind an allow-list, its token", "ipt-model", bearer(tokIPT)},
			{"private model behind an allow-list, no token", "ipt-model", nil},
		}
		for _, tc := range denied {
			st, _, body := e.chat(host, tc.model, tc.h)
			want := strings.ReplaceAll(string(unknownBody), "no-such-model", tc.model)
			if st != unknownSt || string(body) != want {
				t.Errorf("%s %s: %d %s, want exactly the unknown-model answer %d %s", host, tc.name, st, body, unknownSt, want)
			}
		}

		// Two circuits serve shared-model; without a token only the public one may be used.
		a0, b0 := rA.chats.Load(), rB.chats.Load()
		for i := range 20 {
			if st, h, body := e.chat(host, "shared-model", nil); st != 200 {
				t.Fatalf("%s shared-model %d: %s", host, i, st2s(st, h.Get("X-Replica"), body))
			}
		}
		if rB.chats.Load() != b0 || rA.chats.Load()-a0 != 20 {
			t.Errorf("%s: an anonymous caller reached the private circuit serving the same model (a=%d b=%d)", host, rA.chats.Load()-a0, rB.chats.Load()-b0)
		}
		a0, b0 = rA.chats.Load(), rB.chats.Load()
		for range 20 {
			e.chat(host, "shared-model", bearer(tokSharedPriv))
		}
		if rA.chats.Load()-a0+rB.chats.Load()-b0 != 20 || rB.chats.Load() == b0 {
			t.Errorf("%s: with shared-b's token, shared-model went a=%d b=%d (b is usable now)", host, rA.chats.Load()-a0, rB.chats.Load()-b0)
		}
	}
}
