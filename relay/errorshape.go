package relay

import "net/http"

// ErrorShape writes an error the relay makes itself, in the shape its route's callers parse.
type ErrorShape func(w http.ResponseWriter, status int, message string)

// DialectErrors is the shape of an API family's routes: what its official SDKs parse.
func DialectErrors(d Dialect) ErrorShape {
	return func(w http.ResponseWriter, status int, message string) {
		writeError(w, d, &relayError{status: status, message: message})
	}
}

// PlainErrors is the shape of the relay's own routes (admin, health, metrics): {"error": "..."}.
func PlainErrors(w http.ResponseWriter, status int, message string) {
	WriteJSON(w, status, map[string]string{"error": message})
}
