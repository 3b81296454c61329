# The README's commands. `make test` is what CI runs on a fresh machine; `make check` is the
# quick loop while editing.
GO       ?= go
FUZZTIME ?= 15s
BENCH    ?= .

## VERSION and COMMIT are stamped into both binaries (`--version` prints
## "modelrelay-server v1.2.0 (3fd5449)"); override them to build a release from a tarball.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
VERSION := $(VERSION)
COMMIT  := $(COMMIT)
LDFLAGS  = -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)

.PHONY: all build run test check deps vet lint bench fuzz clean bench-compare dist

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/ ./cmd/...

## dist: static binaries (CGO_ENABLED=0) of the server and the worker for each platform in
## dist/modelrelay-VERSION-OS-ARCH/, a .tar.gz of each and their SHA256SUMS. It takes over 3
## minutes on 2 cores (two binaries compiled for each of three platforms);
## `make dist DIST_PLATFORMS=linux/amd64` builds one platform.
DIST_PLATFORMS ?= linux/amd64 linux/arm64 darwin/arm64
SHA256SUM ?= $(shell command -v sha256sum 2>/dev/null || echo shasum -a 256)
dist:
	rm -rf dist
	@set -e; for platform in $(DIST_PLATFORMS); do \
		os=$${platform%/*}; arch=$${platform#*/}; name=modelrelay-$(VERSION)-$$os-$$arch; \
		echo "== $$name"; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags "$(LDFLAGS)" \
			-o dist/$$name/ ./cmd/modelrelay-server ./cmd/modelrelay-worker; \
		tar -C dist -czf dist/$$name.tar.gz $$name; \
	done
	cd dist && $(SHA256SUM) *.tar.gz > SHA256SUMS
	@cat dist/SHA256SUMS

## run: the relay in standalone mode on its built-in defaults (127.0.0.1:8080).
run:
	$(GO) run ./cmd/modelrelay-server

## deps: what the tests need beyond Go: a redis-server binary and the PostgreSQL server
## binaries (initdb, pg_ctl, postgres: tests start their own servers on random loopback ports;
## they never touch one already running), Node with the official client SDKs and Claude
## Code (pinned in testdata/clients/package-lock.json), and Chromium (the status page's
## browser test drives it headless; any of the names below on PATH will do).
CHROMIUM_NAMES = chromium chromium-browser google-chrome google-chrome-stable
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
	@for name in $(CHROMIUM_NAMES); do command -v $$name >/dev/null 2>&1 && exit 0; done; \
		echo "Chromium not found: installing it from Debian packages"; \
		$(APT_INSTALL) chromium >/dev/null; \
		command -v chromium >/dev/null 2>&1 || { echo "could not install chromium" >&2; exit 1; }
	@[ testdata/clients/node_modules/.package-lock.json -nt testdata/clients/package-lock.json ] || { \
		echo "installing the client SDKs, Claude Code and Codex CLI (npm ci in testdata/clients)"; \
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

## check: the edit-test loop: vet, gofmt, then the unit tests of every package, without the
## race detector and without installing anything (no apt-get, no npm). Left out: the end-to-end
## tests (TestE2E*, which build and run the real binaries), the status page's Chromium tests
## (TestStatusPage*) and, through -short, the tests that start PostgreSQL or build release
## binaries. Tests that start redis-server skip themselves when it is not installed. Results of
## unchanged packages come from Go's test cache; CHECKFLAGS=-count=1 runs everything again,
## CHECKFLAGS=-race adds the race detector.
CHECK_SKIP ?= ^(TestE2E|TestStatusPage)
check: vet
	$(GO) test -short -skip '$(CHECK_SKIP)' $(CHECKFLAGS) ./...

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
	rm -rf bin dist

## bench-compare: modelrelay vs nginx, HAProxy, Caddy and Portkey's AI gateway in one run on
## this machine (installs missing tools from Debian packages, and the gateway with npm from the
## pinned configs/bench/portkey into the user's cache); prints a Markdown table. ARGS passes flags, e.g.
## ARGS='-duration 5s -only nginx,static'.
bench-compare:
	$(GO) run ./cmd/modelrelay-bench $(ARGS)
