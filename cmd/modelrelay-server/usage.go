package main

// usageText is the --help output. Keep it in step with settings in config.go;
// TestUsageNamesEveryFlag fails when a flag or variable is missing here.
func usageText() string {
	return `Usage: modelrelay-server [flags]

modelrelay-server accepts OpenAI- and Anthropic-compatible inference requests
(/v1/chat/completions, /v1/responses, /v1/messages, ...) and relays them to model
servers it does not run itself: to workers that dial in over a WebSocket
(modelrelay-worker, or the Rust ModelRelay worker) and to static HTTP backends
listed in the config file. Requests wait in a bounded queue until a worker or
backend is free, and stream back to the client as they are produced.

Run modes:
  standalone  The default. Workers connect to /v1/worker/connect with the worker
              secret; static backends from the config file serve beside them.
  appproxy    Set appproxy.enabled in the config file (or APPPROXY_ENABLED=true).
              The server also registers with a Backend.AI AppProxy coordinator
              as a wildcard worker, receives inference circuits, and serves each
              on <subdomain><wildcard_domain>.

Every setting comes from a flag, an environment variable or the config file: a
flag beats the environment, which beats the file, which beats the default.
Durations take Go syntax (90s, 5m) or a number of seconds (30, 2.5). Lists are
comma-separated.

Listening:
  --listen ADDR                  address to listen on
                                 env LISTEN_ADDR, default 127.0.0.1:8080
  --http-server SERVER           the listener's HTTP server: net/http, or lean (the
                                 relay's own HTTP/1.1 server: less CPU and memory per
                                 request; no TLS or HTTP/2, so appproxy.tls_listen
                                 takes net/http)
                                 env MODELRELAY_HTTP_SERVER, default ` + defaultHTTPServer + `
  --trusted-proxies CIDRS        proxies whose X-Forwarded-For/-Host are believed
                                 (CIDRs or bare IPs)
                                 env TRUSTED_PROXIES, default none
  --trusted-origins ORIGINS      browser origins (https://app.example.com) whose
                                 cross-origin POSTs the inference and admin routes take;
                                 other browsers' get 403 (clients that are no browser
                                 are never refused)
                                 env MODELRELAY_TRUSTED_ORIGINS, default none

Trying it out:
  --demo                         also serve a built-in fake model "demo", to try the relay
                                 env MODELRELAY_DEMO, default false

Workers:
  --worker-secret SECRET         secret relay workers present to join
                                 env WORKER_SECRET, default none (workers cannot join)
  --provider NAME                provider name for workers and static backends
                                 env PROVIDER_NAME, default local
  --max-models-per-worker N      models one worker may register
                                 env MAX_MODELS_PER_WORKER, default 256
  --require-protocol-version     refuse workers whose register names no protocol version
                                 env REQUIRE_PROTOCOL_VERSION, default false

Queueing:
  --max-queue-len N              requests that may wait per pool (0 = unbounded)
                                 env MAX_QUEUE_LEN, default 100
  --queue-timeout DURATION       longest wait in the queue (0 = none)
                                 env QUEUE_TIMEOUT_SECS, default 30s
  --request-timeout DURATION     arrival to first response byte (0 = none)
                                 env REQUEST_TIMEOUT_SECS, default 300s
  --drain-timeout DURATION       on SIGTERM, how long in-flight requests may finish
                                 env DRAIN_TIMEOUT_SECS, default 30s

Failover:
  --worker-grace DURATION        when a model's last relay worker leaves, how long its
                                 requests wait for one to return before 503 (0 = none)
                                 env WORKER_GRACE, default 10s
  --breaker-failures N           consecutive failures (connect error, timeout, 5xx) before
                                 first byte that open a target's breaker
                                 env BREAKER_FAILURES, default 5
  --breaker-cooldown DURATION    how long an open breaker keeps traffic away before one
                                 trial request; doubles after each failed trial
                                 env BREAKER_COOLDOWN, default 5s
  --breaker-max-cooldown DURATION
                                 longest cooldown (at least --breaker-cooldown)
                                 env BREAKER_MAX_COOLDOWN, default 60s
  --slow-start DURATION          a static backend or circuit replica whose breaker closes
                                 again gets its share of traffic back over this long,
                                 from a tenth to all of it (0 = at once)
                                 env SLOW_START, default 30s

Scheduling:
  --routing POLICY               cache_aware: a session returns to its last target, and a
                                 request without one goes to the target that recently
                                 served the longest prefix of its prompt (else the least
                                 loaded); least_load: the least loaded, nothing else
                                 env ROUTING, default cache_aware
  --affinity-ttl DURATION        a session (x-session-id, prompt_cache_key, user or
                                 metadata.user_id) returns to the target that served it
                                 last for this long
                                 env AFFINITY_TTL, default 5m
  --affinity-slack N             a session or prefix match may keep a target whose load is
                                 at most the pool's lowest + N (0 = only the least loaded)
                                 env AFFINITY_SLACK, default a quarter of the target's
                                 max_concurrent, at least 2
  --prefix-min-match FRACTION    share of a prompt's blocks a target must already hold to
                                 win it (more than 0, at most 1)
                                 env PREFIX_MIN_MATCH, default 0.3
  --prefix-cache-entries N       prompt block hashes remembered per target (1-16777216)
                                 env PREFIX_CACHE_ENTRIES, default 16384
  --priority-aging DURATION      a waiting request's priority rises one class per this
                                 much waiting, so low priority never starves
                                 env PRIORITY_AGING, default 10s
  --max-client-priority CLASS    highest priority (high, normal or low) a request without
                                 a client API key may ask for; a higher ask is served at
                                 this class (a key's own max_priority caps keyed requests)
                                 env MODELRELAY_MAX_CLIENT_PRIORITY, default high

Response cache (file: the cache: section; used only by requests that send
x-modelrelay-cache: use or refresh, or whose key or model is set to cache: default):
  --cache-enabled                keep whole successful answers and serve identical
                                 requests of the same tenant from them
                                 env MODELRELAY_CACHE_ENABLED, default false
  --cache-ttl DURATION           how long an answer is served again
                                 env MODELRELAY_CACHE_TTL, default 10m
  --cache-max-bytes N            the cache's size (memory: all of it; one answer holds
                                 at most a sixteenth of it, and 8 MiB)
                                 env MODELRELAY_CACHE_MAX_BYTES, default 268435456
  --cache-store STORE            memory (this process) or redis (--redis-url, shared by
                                 every node)
                                 env MODELRELAY_CACHE_STORE, default memory

Limits:
  --max-body-bytes N             largest request body
                                 env MAX_BODY_BYTES, default 33554432 (32 MiB)
  --max-stream-bytes N           most bytes one streamed response may carry
                                 env MAX_STREAM_BYTES, default 10737418240 (10 GiB)
  --max-frame-bytes N            largest frame a relay worker may send (a non-streamed
                                 answer travels in one); the worker's --max-frame-bytes
                                 must not exceed it
                                 env MAX_FRAME_BYTES, default 67108864 (64 MiB)
  --default-max-tokens N         max_tokens given to an OpenAI request that set none when
                                 it is translated for an Anthropic-only target
                                 env DEFAULT_MAX_TOKENS, default 4096
  --body-read-timeout DURATION   a request body must arrive within this (408 after)
                                 env BODY_READ_TIMEOUT, default 30s
  --body-min-rate N              bytes/s a body must keep up after 5 s (0 = no minimum)
                                 env BODY_MIN_RATE, default 4096
  --body-budget-bytes N          bytes held in bodies not yet dispatched, server-wide
                                 (503 with Retry-After past it)
                                 env BODY_BUDGET_BYTES, default 268435456 (256 MiB)

Logging:
  --log-level LEVEL              debug, info, warn or error
                                 env LOG_LEVEL, default info
  --log-format FORMAT            text or json
                                 env LOG_FORMAT, default text
  --access-log                   one info line per request (route, model, pool, target,
                                 status, timings, tokens); --access-log=false turns it off
                                 env ACCESS_LOG, default true

Admin:
  --admin-token TOKEN            bearer token for /admin/* (unset: admin answers 403)
                                 env MODELRELAY_ADMIN_TOKEN, default none

Client API keys (created with POST /admin/keys):
  --require-api-keys             inference routes need a key (Authorization: Bearer or
                                 x-api-key); /health and GET /v1/models stay open
                                 env MODELRELAY_REQUIRE_API_KEYS, default false
  --database-url URL             PostgreSQL for keys and usage (postgres://...); unset:
                                 in memory, one process, lost on restart
                                 env DATABASE_URL, default none
  --key-cache-ttl DURATION       a validated key is trusted this long without asking the
                                 database: a revocation takes effect within it (max 5s)
                                 env KEY_CACHE_TTL, default 5s
  --usage-max-pending N          usage rows held while the database is down; past it new
                                 usage is dropped and counted
                                 env USAGE_MAX_PENDING, default 100000
  --redis-url URL                Redis that holds keys' rate and token limits and the
                                 stored Responses API responses for every node
                                 (redis://host:port/db); unset: each node its own
                                 env REDIS_URL, default none

The Responses API (/v1/responses on any model server, for Codex CLI):
  --responses-ttl DURATION       a stored response (store: true, the default) is kept
                                 this long for GET /v1/responses/{id} and
                                 previous_response_id
                                 env MODELRELAY_RESPONSES_TTL, default 1h
  --responses-store-max-bytes N  stored responses held in memory, oldest out first
                                 (with --redis-url they live in Redis instead)
                                 env MODELRELAY_RESPONSES_STORE_MAX_BYTES,
                                 default 268435456 (256 MiB)

Config file:
  --config FILE                  YAML file, or TOML when the name ends in .toml;
                                 values may use ${ENV_VAR}
                                 env MODELRELAY_CONFIG, default none

  -h, --help                     print this help and exit
  --version                      print the version and exit

Static upstreams (the backends: list, each with an optional api_key for cloud
endpoints), fallback chains (fallbacks: model: [alternate, ...]), what the relay
should know of a model (models: model: {cache: default or false, reasoning: true})
and AppProxy
worker mode (the appproxy: section) are set in the config file; every appproxy
key can also be set from the environment as APPPROXY_<KEY>, for example
APPPROXY_API_SECRET. See configs/standalone.yaml and configs/appproxy.yaml for
commented examples.
`
}
