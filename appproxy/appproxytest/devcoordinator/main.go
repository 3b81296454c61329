// Command devcoordinator runs the AppProxy coordinator test double on its own, so worker mode
// can be tried locally without a Backend.AI cluster (README.md's AppProxy walkthrough runs it). Besides the
// coordinator's worker API it serves a small /dev API to create and remove circuits:
//
//	POST   /dev/circuits       {"subdomain":"llama","routes":[{"host":"127.0.0.1","port":8000,"ratio":1}],
//	                            "open_to_public":true,"app":"","allowed_client_ips":null}
//	DELETE /dev/circuits/{id}
//
// Created circuits are published as real events on Redis and the call waits for the ack. The
// answer is {"id": ..., "circuit": {...}, "acked": true}, plus "token" for a private circuit
// (open_to_public false, the default): the HS256 circuit token its clients present, signed
// with -jwt-secret, which must equal the worker's APPPROXY_JWT_SECRET.
//
// `devcoordinator token [-jwt-secret S] CIRCUIT_ID` prints such a token for any circuit id.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"time"

	"modelrelay/appproxy/appproxytest"
	"modelrelay/protocol"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "token" {
		os.Exit(runToken(os.Args[2:], os.Stdout, os.Stderr))
	}
	listen := flag.String("listen", "127.0.0.1:10200", "address of the coordinator API")
	redisAddr := flag.String("redis", "127.0.0.1:6379", "Redis server the events go to (host:port)")
	secret := flag.String("secret", "dev-api-secret", "api_secret workers must present")
	jwtSecret := flag.String("jwt-secret", defaultJWTSecret, "the workers' jwt_secret, which signs the tokens of private circuits")
	host, _ := os.Hostname()
	authority := flag.String("authority", host, "worker authority circuits are assigned to")
	flag.Parse()

	coord := appproxytest.NewCoordinator(*secret, *redisAddr)
	mux := http.NewServeMux()
	mux.Handle("/api/", coord)
	mux.HandleFunc("POST /dev/circuits", func(w http.ResponseWriter, r *http.Request) {
		circuit, err := newCircuit(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		answer, err := created(circuit, *jwtSecret, time.Now())
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		ack, err := coord.CreateCircuit(r.Context(), *authority, answer.Circuit, protocol.FormatArgs)
		if err != nil {
			http.Error(w, "no ack: "+err.Error(), http.StatusGatewayTimeout)
			return
		}
		answer.Acked = ack != nil
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(answer)
	})
	mux.HandleFunc("DELETE /dev/circuits/{id}", func(w http.ResponseWriter, r *http.Request) {
		if err := coord.RemoveCircuit(r.Context(), *authority, r.PathValue("id"), protocol.FormatArgs); err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	log.Printf("devcoordinator: API on http://%s, events to redis %s, authority %q", *listen, *redisAddr, *authority)
	log.Fatal(http.ListenAndServe(*listen, mux))
}

// createdCircuit is the answer to POST /dev/circuits.
type createdCircuit struct {
	ID      string          `json:"id"`
	Circuit json.RawMessage `json:"circuit"`
	Acked   bool            `json:"acked"`
	Token   string          `json:"token,omitempty"` // private circuits only
}

// created renders circuit as it is published, with a token when clients need one.
func created(c protocol.Circuit, jwtSecret string, now time.Time) (createdCircuit, error) {
	raw, err := json.Marshal(c)
	if err != nil {
		return createdCircuit{}, err
	}
	answer := createdCircuit{ID: c.ID, Circuit: raw}
	if !c.OpenToPublic {
		if answer.Token, err = circuitToken(jwtSecret, c.ID, now, tokenTTL); err != nil {
			return createdCircuit{}, err
		}
	}
	return answer, nil
}

type devRoute struct {
	Host  string  `json:"host"`
	Port  int     `json:"port"`
	Ratio float64 `json:"ratio"`
}

// newCircuit builds a full inference circuit from the few fields a person types.
func newCircuit(body io.Reader) (protocol.Circuit, error) {
	var in struct {
		Subdomain        string     `json:"subdomain"`
		App              string     `json:"app"`
		OpenToPublic     bool       `json:"open_to_public"`
		AllowedClientIPs *string    `json:"allowed_client_ips"`
		Routes           []devRoute `json:"routes"`
	}
	if err := json.NewDecoder(io.LimitReader(body, 1<<20)).Decode(&in); err != nil || in.Subdomain == "" {
		return protocol.Circuit{}, fmt.Errorf(`body must be {"subdomain": "...", "routes": [{"host": "...", "port": N}]}`)
	}
	id := protocol.NewUUID()
	routes := make([]protocol.Route, 0, len(in.Routes))
	sessions := []string{}
	for _, r := range in.Routes {
		ratio := r.Ratio
		if ratio == 0 {
			ratio = 1
		}
		routeID, session, host := protocol.NewUUID(), protocol.NewUUID(), r.Host
		routes = append(routes, protocol.Route{RouteID: &routeID, SessionID: session, KernelHost: &host,
			KernelPort: r.Port, Protocol: "http", TrafficRatio: ratio})
		sessions = append(sessions, session)
	}
	now := time.Now().UTC().Format("2006-01-02T15:04:05.000000Z")
	return protocol.Circuit{ID: id, App: in.App, Protocol: "http", Worker: protocol.NewUUID(),
		AppMode: protocol.AppModeInference, FrontendMode: protocol.FrontendModeWildcard, Envs: map[string]any{},
		OpenToPublic: in.OpenToPublic, AllowedClientIPs: in.AllowedClientIPs, Subdomain: &in.Subdomain,
		RouteInfo: routes, SessionIDs: sessions, CreatedAt: now, UpdatedAt: now}, nil
}
