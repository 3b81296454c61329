package ingress

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Verifier checks circuit tokens: JWTs signed with HS256 and the worker's jwt_secret (not its
// api_secret), as the coordinator and manager issue them.
type Verifier struct {
	Secret []byte
	// RequireExp refuses tokens without "exp". Off by default: PyJWT and the stock worker accept
	// them forever, and coordinators in the field mint such tokens.
	RequireExp bool
	cache      *tokenCache // nil: verify every time
}

// NewVerifier returns a Verifier that remembers the tokens it verified (see tokenCache).
func NewVerifier(secret []byte) Verifier {
	return Verifier{Secret: secret, cache: newTokenCache(1 << 16)}
}

// tokenParser is shared: its options never change and parsing keeps no state in it. Pinning
// the method list is what rejects "none", other HMAC sizes and the RS256-with-HMAC-key trick.
var tokenParser = jwt.NewParser(jwt.WithValidMethods([]string{"HS256"}), jwt.WithIssuedAt())

// Reasons inside "E20008: Invalid authorization token (<reason>)". Where one exists, the text is
// PyJWT's message for the same failure, so callers see what the stock worker would say.
const (
	reasonSegments  = "Not enough segments"
	reasonEncoding  = "Invalid token encoding"
	reasonAlg       = "The specified alg value is not allowed"
	reasonSignature = "Signature verification failed"
	reasonExpired   = "Signature has expired"
	reasonNbf       = "The token is not yet valid (nbf)"
	reasonIat       = "The token is not yet valid (iat)"
	reasonClaimType = "Invalid claim type"
	reasonAudience  = "Invalid audience"
	reasonNoExp     = `Token is missing the "exp" claim`
	reasonOther     = "Invalid token"
)

// credentials verifies the request's Authorization header once and returns the token's "id"
// claim ("" when absent or not a string, which then matches no circuit).
func (v Verifier) credentials(r *http.Request) (id string, p *Problem) {
	token, p := bearerToken(r.Header.Get("Authorization"))
	if p != nil {
		return "", p
	}
	return v.verify(token)
}

// bearerToken splits "<scheme> <token>" at the first space. The scheme is case-sensitive, as in
// the stock worker: "bearer" is refused.
func bearerToken(header string) (string, *Problem) {
	if header == "" {
		return "", noAuthorization()
	}
	scheme, token, _ := strings.Cut(header, " ")
	if scheme != "Bearer" && scheme != "BackendAI" {
		return "", unsupportedScheme(scheme)
	}
	return token, nil
}

// verify checks signature, algorithm and the time claims present, then refuses any audience:
// circuit tokens never carry one, so a token with "aud" was minted for something else.
func (v Verifier) verify(token string) (string, *Problem) {
	if len(v.Secret) == 0 {
		return "", invalidToken(reasonSignature)
	}
	now := time.Now()
	if v.cache != nil {
		if id, ok := v.cache.get(token, now); ok {
			return id, nil
		}
	}
	var claims circuitClaims
	tok, err := tokenParser.ParseWithClaims(token, &claims, func(*jwt.Token) (any, error) {
		return v.Secret, nil
	})
	if err != nil {
		return "", invalidToken(failureReason(token, tok, err))
	}
	if claims.hasAud {
		return "", invalidToken(reasonAudience)
	}
	exp, _ := claims.exp.get()
	if v.RequireExp && exp == nil {
		return "", invalidToken(reasonNoExp)
	}
	if v.cache != nil {
		entry := cachedToken{id: claims.id}
		if exp != nil {
			entry.exp = exp.Time
		}
		v.cache.put(token, entry)
	}
	return claims.id, nil
}

// failureReason names the first failure in PyJWT's order: decoding, algorithm, signature, then
// iat, nbf and exp.
func failureReason(raw string, tok *jwt.Token, err error) string {
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		if strings.Count(raw, ".") != 2 {
			return reasonSegments
		}
		return reasonEncoding
	case tok == nil || tok.Header["alg"] != "HS256":
		return reasonAlg
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return reasonSignature
	case errors.Is(err, jwt.ErrInvalidType):
		return reasonClaimType
	case errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return reasonIat
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return reasonNbf
	case errors.Is(err, jwt.ErrTokenExpired):
		return reasonExpired
	default:
		return reasonOther
	}
}
