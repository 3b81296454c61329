package endpoint

// Dialect is an API family: how a call's body, answers and errors are shaped.
type Dialect uint8

const (
	OpenAI    Dialect = iota // Chat Completions (and the other /v1 calls OpenAI's servers answer)
	Anthropic                // Messages
	Responses                // OpenAI's Responses API
)

// Dialects is how many API families there are: the size of a table indexed by Dialect.
const Dialects = 3

// String is the family's name, as configuration and the x-modelrelay-translated header spell it.
func (d Dialect) String() string {
	switch d {
	case Anthropic:
		return "anthropic"
	case Responses:
		return "responses"
	}
	return "openai"
}

// ErrorType is the error type clients of d read for an HTTP status, whoever made the error:
// the relay, a worker, or a target whose answer was translated into d.
func (d Dialect) ErrorType(status int) string {
	if d == Anthropic {
		return anthropicErrorType(status)
	}
	return openAIErrorType(status) // the Responses API types its errors as OpenAI's others
}

// openAIErrorType follows OpenAI's error objects: the client's mistakes are
// invalid_request_error unless a narrower type says more; 502 and 504 name the relay's own
// upstream failures, so a client can tell a model server down from the relay's.
func openAIErrorType(status int) string {
	switch {
	case status == 401:
		return "authentication_error"
	case status == 403:
		return "permission_error"
	case status == 429:
		return "rate_limit_error"
	case status >= 400 && status < 500:
		return "invalid_request_error"
	case status == 502:
		return "upstream_error"
	case status == 504:
		return "timeout_error"
	}
	return "server_error"
}

// anthropicErrorType follows Anthropic's error types (529 is its "overloaded"; 503 reads the
// same to its SDKs, which retry both).
func anthropicErrorType(status int) string {
	switch status {
	case 400, 405, 413, 422:
		return "invalid_request_error"
	case 401:
		return "authentication_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 429:
		return "rate_limit_error"
	case 503, 529:
		return "overloaded_error"
	}
	return "api_error"
}
