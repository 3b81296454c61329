package endpoint

import "strings"

// Route is an inference call's translation: which mapping carries it to a target of the other
// family. RouteNone calls are always sent as the client sent them.
type Route uint8

const (
	RouteNone        Route = iota
	RouteChat              // OpenAI Chat Completions <-> Anthropic Messages
	RouteMessages          // Anthropic Messages <-> OpenAI Chat Completions
	RouteCountTokens       // Anthropic count_tokens -> a /tokenize call, or an estimate
	RouteResponses         // OpenAI Responses -> Chat Completions (-> Anthropic Messages)
)

// Endpoint is one inference call the relay parses ({model, stream}) and what each stage needs
// to know of it. The zero Endpoint is a call the relay does not parse: every stage leaves it
// alone.
type Endpoint struct {
	Path    string
	Dialect Dialect
	Route   Route
	// Counterpart is the path the call is sent to, translated, on a target of another
	// family ("" when Route is RouteNone). A Responses call goes to Chat Completions; a target
	// that speaks only Anthropic Messages gets that call's counterpart in turn.
	Counterpart string
	// Operation is the OpenTelemetry GenAI operation name; "" for a call that generates
	// nothing (count_tokens), whose answers are neither charged to a key nor observed.
	Operation string
	// Prompt says the body carries a prompt (messages or input) that cache-aware placement
	// reads.
	Prompt bool
	// Usage says the answer reports the tokens it used, for the usage tap.
	Usage bool
	// AskUsage says a streamed answer reports usage only when the body asks for it
	// (stream_options.include_usage, OpenAI's streaming calls): the relay asks when a key's
	// accounting needs it.
	AskUsage bool
}

// table is every inference call, OpenAI's, then Anthropic's, then the Responses API's.
var table = [...]Endpoint{
	{Path: "/v1/chat/completions", Dialect: OpenAI, Route: RouteChat, Counterpart: "/v1/messages",
		Operation: "chat", Prompt: true, Usage: true, AskUsage: true},
	{Path: "/v1/completions", Dialect: OpenAI,
		Operation: "text_completion", Prompt: true, Usage: true, AskUsage: true},
	{Path: "/v1/embeddings", Dialect: OpenAI,
		Operation: "embeddings", Usage: true},
	{Path: "/v1/messages", Dialect: Anthropic, Route: RouteMessages, Counterpart: "/v1/chat/completions",
		Operation: "chat", Prompt: true, Usage: true},
	{Path: "/v1/messages/count_tokens", Dialect: Anthropic, Route: RouteCountTokens, Counterpart: "/tokenize"},
	{Path: "/v1/responses", Dialect: Responses, Route: RouteResponses, Counterpart: "/v1/chat/completions",
		Operation: "chat", Prompt: true, Usage: true},
}

// DialectOf is the API family of any path a worker or a target may be asked to answer, in
// the table or not (with a query string, a call passed through such as /v1/messages/batches,
// a translated call): Anthropic's calls all live under /v1/messages, the Responses API's
// under /v1/responses, and anything else is answered in OpenAI's shape.
func DialectOf(path string) Dialect {
	switch {
	case strings.HasPrefix(path, "/v1/messages"):
		return Anthropic
	case strings.HasPrefix(path, "/v1/responses"):
		return Responses
	}
	return OpenAI
}

// ModelList is the path of the OpenAI model list (GET): what the relay answers every family's
// clients, and what it and the worker ask a model server to discover its models.
const ModelList = "/v1/models"

// All returns every inference call, in the table's order.
func All() []Endpoint { return append([]Endpoint(nil), table[:]...) }

// For returns the inference call at path (a URL path, without its query), and false for any
// other path. It is on every request's path: it allocates nothing, and a scan of the rows
// (mostly length compares) measured as fast as a switch on the path and faster than a map.
func For(path string) (Endpoint, bool) {
	for i := range table {
		if table[i].Path == path {
			return table[i], true
		}
	}
	return Endpoint{}, false
}
