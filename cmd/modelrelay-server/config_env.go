package main

import (
	"fmt"
	"slices"
	"strings"

	"modelrelay/cmd/internal/pprofserve"
)

// envPrefixes mark the variables that are meant for this server: one of them that names no
// setting is a misspelling, reported like an unknown key in the file. Unprefixed settings
// (LISTEN_ADDR, WORKER_SECRET, ...) cannot be checked this way: other programs use the names.
var envPrefixes = []string{"MODELRELAY_", "APPPROXY_"}

// otherEnvVars are prefixed variables the server reads outside the settings table.
var otherEnvVars = []string{envConfigFile, pprofserve.EnvVar}

// envValues reads the environment. An empty variable counts as unset, as most shells and
// orchestrators cannot tell the two apart.
func envValues(getenv func(string) string) map[string]any {
	out := map[string]any{}
	for _, s := range settings {
		if v := getenv(s.env); v != "" {
			out[s.key] = v
		}
	}
	for _, key := range appProxyKeys {
		if v := getenv(appProxyEnv(key)); v != "" {
			out["appproxy."+key] = v
		}
	}
	return out
}

func appProxyEnv(key string) string { return "APPPROXY_" + strings.ToUpper(key) }

// unknownEnvWarnings names every set MODELRELAY_* or APPPROXY_* variable that the server does
// not read. environ supplies the names (NAME=value entries); a name counts only when getenv
// has a value for it. fileVars are the variables the config file interpolates: those are read.
func unknownEnvWarnings(environ []string, getenv func(string) string, fileVars []string) []string {
	known := slices.Concat(otherEnvVars, fileVars)
	for _, s := range settings {
		known = append(known, s.env)
	}
	for _, key := range appProxyKeys {
		known = append(known, appProxyEnv(key))
	}
	var names []string
	for _, entry := range environ {
		name, _, _ := strings.Cut(entry, "=")
		prefixed := slices.ContainsFunc(envPrefixes, func(p string) bool { return strings.HasPrefix(name, p) })
		if prefixed && !slices.Contains(known, name) && !slices.Contains(names, name) && getenv(name) != "" {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var warns []string
	for _, name := range names {
		w := fmt.Sprintf("config: environment: unknown variable %q ignored", name)
		if guess := envGuess(name, known); guess != "" {
			w += fmt.Sprintf(" (did you mean %q?)", guess)
		}
		warns = append(warns, w)
	}
	return warns
}

// envGuess suggests a known variable close to name, or the unprefixed setting that name
// adds a prefix to (MODELRELAY_WORKER_SECRET -> WORKER_SECRET: the sample configs interpolate
// such names, so they look like settings).
func envGuess(name string, known []string) string {
	if guess := closestKey(name, known); guess != "" {
		return guess
	}
	for _, s := range settings {
		if strings.TrimPrefix(name, "MODELRELAY_") == s.env {
			return s.env
		}
	}
	return ""
}
