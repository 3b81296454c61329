package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"modelrelay/protocol"
)

// defaultJWTSecret matches the walkthrough's APPPROXY_JWT_SECRET, so that its tokens verify
// without a flag. It is a development value: the real coordinator's is its [secrets] jwt_secret.
const defaultJWTSecret = "dev-jwt"

// tokenTTL is how long a minted token is good for: a working day of trying things out.
const tokenTTL = 24 * time.Hour

// circuitToken is what the coordinator hands a user of a private inference circuit: an HS256
// JWT signed with the worker's jwt_secret (not its api_secret) whose "id" claim is the circuit
// id, which is all the worker checks. app_mode mirrors the coordinator's tokens; "exp" bounds
// it, as a token without one is good forever.
func circuitToken(secret, circuitID string, now time.Time, ttl time.Duration) (string, error) {
	if secret == "" {
		return "", errors.New("empty jwt secret")
	}
	claims := jwt.MapClaims{
		"id":       circuitID,
		"app_mode": protocol.AppModeInference,
		"iat":      now.Unix(),
		"exp":      now.Add(ttl).Unix(),
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(secret))
}

// runToken is `devcoordinator token [-jwt-secret S] [-ttl D] CIRCUIT_ID`: it prints a token
// for a circuit that already exists (POST /dev/circuits answers one for each private circuit
// it creates) and needs no running coordinator.
func runToken(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("devcoordinator token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	secret := fs.String("jwt-secret", defaultJWTSecret, "the worker's jwt_secret (APPPROXY_JWT_SECRET)")
	ttl := fs.Duration("ttl", tokenTTL, "how long the token is valid")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: devcoordinator token [-jwt-secret SECRET] [-ttl DURATION] CIRCUIT_ID")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 || *ttl <= 0 {
		fs.Usage()
		return 2
	}
	token, err := circuitToken(*secret, fs.Arg(0), time.Now(), *ttl)
	if err != nil {
		fmt.Fprintln(stderr, "devcoordinator token:", err)
		return 1
	}
	fmt.Fprintln(stdout, token)
	return 0
}
