package ingress

import (
	"encoding/json"
	"net/http"
)

// Problem is a refusal in the Backend.AI AppProxy worker's wire shape: problem JSON
// ({"type","title","msg"}) that Backend.AI clients parse, plus an OpenAI-style "error" member so
// OpenAI SDKs show a readable message instead of a bare status.
type Problem struct {
	Status     int    // HTTP status
	Slug       string // problem type, after https://api.backend.ai/probs/
	Title      string // the stock worker's title for that type
	Msg        string // E-code message, as the stock worker words it
	OpenAIType string // OpenAI error "type"
	OpenAICode string // OpenAI error "code"
	reason     string // why ingress refused the request (Reason); "" for answers that are no refusal
}

// ProblemBase prefixes every problem type.
const ProblemBase = "https://api.backend.ai/probs/"

func (p *Problem) Error() string { return p.Msg }

// Why ingress refused a request, as a metric label: a small fixed set, whatever a client sends.
const (
	ReasonUnknownSubdomain = "unknown_subdomain"     // 400 E20009: no circuit has the subdomain
	ReasonClientIP         = "client_ip_not_allowed" // 403 E20011: outside the circuit's allow-list
	ReasonMissingToken     = "missing_token"         // 401 E20006: no Authorization header
	ReasonScheme           = "unsupported_scheme"    // 401 E20007: neither Bearer nor BackendAI
	ReasonInvalidToken     = "invalid_token"         // 401 E20008: malformed, wrong signature or claims
	ReasonExpiredToken     = "expired_token"         // 401 E20008: past its "exp"
	ReasonTokenMismatch    = "token_mismatch"        // 401 E20009: a valid token for another circuit
)

// Reasons lists every reason Reason returns, so that a counter can start each at zero.
func Reasons() []string {
	return []string{ReasonUnknownSubdomain, ReasonClientIP, ReasonMissingToken, ReasonScheme,
		ReasonInvalidToken, ReasonExpiredToken, ReasonTokenMismatch}
}

// Reason says why ingress refused the request, one of Reasons; "" for a problem that is no
// refusal of the caller (a circuit with no replica to serve it).
func (p *Problem) Reason() string { return p.reason }

type problemBody struct {
	Type  string        `json:"type"`
	Title string        `json:"title"`
	Msg   string        `json:"msg"`
	Error openAIProblem `json:"error"`
}

type openAIProblem struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Code    string `json:"code"`
}

// MarshalJSON renders the response body.
func (p *Problem) MarshalJSON() ([]byte, error) {
	return json.Marshal(problemBody{
		Type:  ProblemBase + p.Slug,
		Title: p.Title,
		Msg:   p.Msg,
		Error: openAIProblem{Message: p.Msg, Type: p.OpenAIType, Code: p.OpenAICode},
	})
}

// ServeHTTP writes the problem as the response. The CORS header matches the stock worker, which
// sets it on every answer so browser clients can read the error.
func (p *Problem) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	body, err := p.MarshalJSON()
	if err != nil { // only strings inside; cannot happen, but never answer with an empty 200
		body = []byte(`{}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Access-Control-Allow-Origin", "*")
	if p.Status == http.StatusServiceUnavailable || p.Status == http.StatusTooManyRequests {
		h.Set("Retry-After", "1")
	}
	w.WriteHeader(p.Status)
	_, _ = w.Write(body)
}

const (
	titleBadRequest  = "Bad request."
	titleCredentials = "Authentication credentials not valid."
	titleClientIP    = "Client address not allowed."
	titleNoWorker    = "Worker not available."
	titleConnRefused = "Cannot connect to Backend.AI kernel."
	titleTooMany     = "Too many API requests."
	slugBadRequest   = "generic-bad-request"
	slugCredentials  = "invalid-credentials"
	slugClientIP     = "client-ip-not-allowed"
	slugNoWorker     = "appproxy/worker-not-available"
	slugConnRefused  = "appproxy/container-connection-refused"
	slugTooMany      = "too-many-requests"
	kindInvalid      = "invalid_request_error"
	kindAuth         = "authentication_error"
	kindPermission   = "permission_error"
	kindServer       = "server_error"
	kindUpstream     = "upstream_error"
	kindRateLimit    = "rate_limit_error"
	maxSchemeLen     = 16
)

// UnknownSubdomain is the 400 for a host inside the wildcard domain that no circuit claims.
func UnknownSubdomain(sub string) *Problem {
	return &Problem{Status: http.StatusBadRequest, Slug: slugBadRequest, Title: titleBadRequest,
		Msg: "E20009: Subdomain " + sub + " not registered", OpenAIType: kindInvalid, OpenAICode: "subdomain_not_registered",
		reason: ReasonUnknownSubdomain}
}

// ClientIPNotAllowed is the 403 for a caller outside a circuit's allow-list.
func ClientIPNotAllowed() *Problem {
	return &Problem{Status: http.StatusForbidden, Slug: slugClientIP, Title: titleClientIP,
		Msg: "E20011: Client address not allowed", OpenAIType: kindPermission, OpenAICode: "client_ip_not_allowed",
		reason: ReasonClientIP}
}

// WorkerNotAvailable is the 503 for a circuit with no usable route.
func WorkerNotAvailable() *Problem {
	return &Problem{Status: http.StatusServiceUnavailable, Slug: slugNoWorker, Title: titleNoWorker,
		Msg: titleNoWorker, OpenAIType: kindServer, OpenAICode: "worker_not_available"}
}

// ContainerConnectionRefused is the 502 when every replica tried refused the connection.
func ContainerConnectionRefused() *Problem {
	return &Problem{Status: http.StatusBadGateway, Slug: slugConnRefused, Title: titleConnRefused,
		Msg: titleConnRefused, OpenAIType: kindUpstream, OpenAICode: "container_connection_refused"}
}

// Throttled is the 429 that stands for p, a refused token, when the caller's address sends
// wrong tokens faster than the guess throttle answers them: it says nothing of the token. It
// is counted under p's reason.
func (p *Problem) Throttled() *Problem {
	return &Problem{Status: http.StatusTooManyRequests, Slug: slugTooMany, Title: titleTooMany,
		Msg: "Too many failed authentication attempts from this address; retry later", OpenAIType: kindRateLimit,
		OpenAICode: "too_many_failed_attempts", reason: p.reason}
}

func credentialProblem(msg, code, reason string) *Problem {
	return &Problem{Status: http.StatusUnauthorized, Slug: slugCredentials, Title: titleCredentials,
		Msg: msg, OpenAIType: kindAuth, OpenAICode: code, reason: reason}
}

func noAuthorization() *Problem {
	return credentialProblem("E20006: Authorization header not provided", "authorization_missing", ReasonMissingToken)
}

// unsupportedScheme echoes a real scheme (a short word) in full, but only the first bytes of
// anything longer: a header without a space is all "scheme", so it may be a bare API key or
// token, which must not come back in a message that may end up in logs.
func unsupportedScheme(scheme string) *Problem {
	if len(scheme) > maxSchemeLen {
		scheme = scheme[:maxSchemeLen/2] + "..."
	}
	return credentialProblem("E20007: Unsupported authorization method "+scheme, "unsupported_authorization_method", ReasonScheme)
}

// invalidToken refuses a token for reason, in PyJWT's words (see credentials.go).
func invalidToken(reason string) *Problem {
	label := ReasonInvalidToken
	if reason == reasonExpired {
		label = ReasonExpiredToken
	}
	return credentialProblem("E20008: Invalid authorization token ("+reason+")", "invalid_token", label)
}

func tokenMismatch() *Problem {
	return credentialProblem("E20009: Authorization token mismatch", "token_mismatch", ReasonTokenMismatch)
}
