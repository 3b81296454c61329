# The README's commands. `make test` is what CI runs on a fresh machine.
GO       ?= go
FUZZTIME ?= 15s
BENCH    ?= .

.PHONY: all build run test deps vet lint bench fuzz clean bench-compare

all: build

build:
	$(GO) build -o bin/ ./cmd/...

## run: the relay in standalone mode on its built-in defaults (127.0.0.1:8080).
run:
	$(GO) run ./cmd/modelrelay-server

## deps: what the tests need beyond Go: a redis-server binary and the PostgreSQL server
## binaries (initdb, pg_ctl, postgres: tests start their own servers on random loopback ports;
## they never touch one already running), and Node with the official client SDKs and Claude
## Code (pinned in testdata/clients/package-lock.json).
APT_INSTALL = SUDO=$$(command -v sudo >/dev/null 2>&1 && [ "$$(id -u)" != 0 ] && echo sudo); \
	$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq
deps:
	@command -v redis-server >/dev/null 2>&1 || { \
		echo "redis-server not found: installing it from Debian packages"; \
		$(APT_INSTALL) redis-server >/dev/null; \
		command -v redis-server >/dev/null 2>&1 || { echo "could not install redis-server" >&2; exit 1; }; }
	@{ ls /usr/lib/postgresql/*/bin/initdb || command -v initdb; } >/dev/null 2>&1 || { \
		echo "PostgreSQL (initdb) not found: installing it from Debian packages"; \
		$(APT_INSTALL) postgresql >/dev/null; \
		{ ls /usr/lib/postgresql/*/bin/initdb || command -v initdb; } >/dev/null 2>&1 || { echo "could not install postgresql" >&2; exit 1; }; }
	@{ command -v node && command -v npm; } >/dev/null 2>&1 || { \
		echo "node/npm not found: installing them from Debian packages"; \
		$(APT_INSTALL) nodejs npm >/dev/null; \
		command -v npm >/dev/null 2>&1 || { echo "could not install nodejs and npm" >&2; exit 1; }; }
	@[ testdata/clients/node_modules/.package-lock.json -nt testdata/clients/package-lock.json ] || { \
		echo "installing the client SDKs and Claude Code (npm ci in testdata/clients)"; \
		cd testdata/clients && npm ci --no-audit --no-fund --loglevel=error; }

vet:
	$(GO) vet ./...
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
		if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi

## lint: staticcheck, fetched through the Go module proxy at a pinned version that knows this
## Go release. The proxy serves staticcheck by its module version (v0.8.2 is release 2026.2.2),
## not by the year.release names of its changelog: `@2025.1.1` is refused.
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
lint: vet
	$(GO) run $(STATICCHECK) ./...

## test: vet, gofmt, then every test (fuzz seed corpora included) under the race detector.
test: deps vet
	$(GO) test -race -count=1 -timeout 20m ./...

## bench: the testing.B benchmarks (dispatch, relay overhead, ingress, reconcile, daemon path).
bench:
	$(GO) test -run='^$$' -bench='$(BENCH)' -benchmem -count=1 ./...

## fuzz: each fuzz target for FUZZTIME (the seed corpora also run in `make test`).
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
		for target in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
			echo "== $$pkg $$target"; \
			$(GO) test -run='^$$' -fuzz="^$$target$$" -fuzztime=$(FUZZTIME) $$pkg; \
		done; \
	done

clean:
	rm -rf bin

## bench-compare: modelrelay vs nginx, HAProxy and Caddy in one run on this machine (installs
## missing tools from Debian packages); prints a Markdown table. ARGS passes flags, e.g.
## ARGS='-duration 5s -only nginx,static'.
bench-compare:
	$(GO) run ./cmd/modelrelay-bench $(ARGS)
