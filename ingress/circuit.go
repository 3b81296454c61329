package ingress

// Circuit is what ingress needs to know about one Backend.AI inference circuit: how it is
// addressed, who may reach it, and which relay pool serves it.
type Circuit struct {
	ID           string // coordinator's circuit UUID; a token's "id" claim must equal it
	Subdomain    string // label(s) left of the wildcard domain; compared lowercased
	OpenToPublic bool   // no credentials required (the allow-list still applies)
	AllowList    AllowList
	Pool         string // relay pool name, opaque here (for example "circuit:<id>")
	// Model is the circuit's canonical model name (its replicas' first model, else its app
	// name; "" when neither is known): it keys the fallback chain of a request on its host.
	Model string
}
