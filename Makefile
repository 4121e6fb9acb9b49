# loadreporter — build, test and generate.
#
#   make run             serve with the embedded defaults (simulated engine)
#   make test            the whole test suite, race detector on
#   make generate        regenerate protobuf/Connect code and the Wire injector
#   make check-generate  fail if regenerating changes anything committed
#   make lint            go vet, staticcheck, gofmt, buf lint and buf format
#   make image           the container image, built without a daemon, as bin/loadreporter-image.tar
#   make bench-route     what fresh load buys a router: simulated engines, real reporters, routers (a few minutes)

GO      ?= go
BUF     := $(GO) tool -modfile=tools/go.mod buf
LISTEN  ?= 127.0.0.1:8080

.PHONY: run test fuzz soak test-short generate check-generate lint bench bench-zmq bench-front bench-route services peers image

run:
	@echo "building loadreporter (the first build downloads modules, ~2 min)…"
	$(GO) run ./cmd/loadreporter serve --listen $(LISTEN)

# services starts what the tests need when the machine has it but it is down.
services:
	@./tests/services.sh

# peers makes the pinned venvs of the real routers and publishers
# (tests/peers/*.txt into .venv-peers/), quiet when they are up to date.
peers:
	@bash tests/peers/setup.sh

test: services peers
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 12m ./...
	$(GO) test -count=1 -run '^(TestNative(MonitorStream|IdleConnection)Heap|TestReadOnReady|TestThePumpKeepsItsQueueFromFireToFire)$$' ./adapters/rpc

# fuzz runs every fuzz target for FUZZTIME each (CI: a short run on top of
# the committed corpora, which plain `go test` already replays). A count
# (Nx), not a duration: Go 1.26's fuzz coordinator can report a bare
# "context deadline exceeded" when a duration ends mid-execution on a busy
# machine (go.dev/issue/75804, fixed in Go 1.27); a count has no deadline.
FUZZTIME ?= 3000x
FUZZ_TARGETS := FuzzParseLoads:./adapters/source/sglanghttp FuzzParseMetrics:./adapters/source/vllm \
	FuzzAuditArguments:./web FuzzMonitorFrames:./adapters/rpc
fuzz:
	@for t in $(FUZZ_TARGETS); do \
		echo "fuzz $${t%%:*} for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$${t%%:*}$$" -fuzztime $(FUZZTIME) $${t#*:} || exit 1; \
	done

# soak runs the soak test for SOAK (default 3m) and prints its figures.
SOAK ?= 3m
soak:
	$(GO) test ./tests -count=1 -run '^TestSoak$$' -v -args -soak $(SOAK)

test-short:
	$(GO) test -race -count=1 -short ./...

# The dashboard: templ views, then the pages' scripts (TypeScript from our
# protos by the local protoc-gen-es that npm ci installs, bundled by esbuild
# into web/static/live.js for the live page and web/static/fleet.js for the
# fleet command's page, committed and embedded).
generate:
	$(BUF) generate
	$(GO) tool wire ./cmd/loadreporter/app
	$(GO) tool templ generate -include-version=false -path web/views
	cd web/live && npm ci --no-audit --no-fund
	$(BUF) generate --template web/live/buf.gen.yaml
	cd web/live && npx tsc -p . && npx esbuild src/main.ts --bundle --minify --format=iife --target=es2020 --legal-comments=none --log-level=warning --outfile=../static/live.js
	cd web/live && npx esbuild src/fleet.ts --bundle --minify --format=iife --target=es2020 --legal-comments=none --log-level=warning --outfile=../static/fleet.js

GENERATED := gen cmd/loadreporter/app/wire_gen.go web/views web/live/gen web/static/live.js web/static/fleet.js

# check-generate fails when regenerating changes, adds or removes a
# generated file (untracked files count: status, not diff).
check-generate: generate
	@changed="$$(git status --porcelain --untracked-files=all -- $(GENERATED))"; \
	if [ -n "$$changed" ]; then \
		echo "generated code is out of date; run 'make generate' and commit:"; echo "$$changed"; exit 1; \
	fi; echo "generated code is up to date"

lint:
	$(GO) vet ./...
	$(GO) tool -modfile=tools/go.mod staticcheck ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	$(BUF) lint
	$(BUF) format -d --exit-code

# bench runs the fan-out scenarios of docs/performance.md (1 and 100 × 100 ms; 1 000 × 100 ms
# over 1, 10 and 1 000 connections; 10 000 × 1 s over 100) against loadreporter
# as shipped and its two references, a grpc-go server shaped like ORCA's
# service and a bare grpc-go fan-out, side by side, with the targets (ratios
# to them) met or not; with ROUTERS, INTERVAL or CONNS set, the one scenario they describe
# instead (./bin/loadbench --routers 1000 --interval 100ms --conns 10).
# CLIENT_BDP=false measures with a client that does not probe bandwidth
# (tonic's default).
BENCH_ARGS = $(if $(ROUTERS)$(INTERVAL)$(CONNS),$(if $(ROUTERS),--routers $(ROUTERS)) $(if $(INTERVAL),--interval $(INTERVAL)) $(if $(CONNS),--conns $(CONNS)),--suite) $(if $(CLIENT_BDP),--client-bdp=$(CLIENT_BDP))
bench:
	$(GO) build -o bin/loadbench ./cmd/loadbench
	./bin/loadbench $(BENCH_ARGS)

# bench-zmq: how old the load a router receives is, sglang-http against
# sglang-zmq with the same stand-in engine, side by side.
bench-zmq:
	$(GO) test ./tests -run '^$$' -bench ReceiptAge -benchtime 1x

# bench-front: the front mode against the engine direct and against nginx as
# a streaming reverse proxy, side by side in one run: added latency and CPU
# per request (a POST, a 256-event SSE stream; gRPC unary and a 256-message
# stream against the engine direct), 1 000 held streams, cached /metrics.
# nginx is Debian's, installed on first use (tests/services.sh nginx; its
# own service kept from starting). FRONTBENCH_ARGS passes flags
# (--cpuprofile bin/front.pprof profiles the front).
bench-front:
	@command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || ./tests/services.sh nginx
	$(GO) build -o bin/loadreporter ./cmd/loadreporter
	$(GO) build -o bin/frontbench ./cmd/frontbench
	./bin/frontbench --loadreporter bin/loadreporter $(FRONTBENCH_ARGS)

# bench-route: the routing benchmark of docs/performance.md (cmd/routebench). The model mode's
# sweeps in virtual time, then a few rows end to end (engine-sim, a loadreporter
# child per engine, client.Fleet routers); writes the staleness chart to
# bin/routebench-staleness.svg. ROUTEBENCH_ARGS adds flags, for example
# ROUTEBENCH_ARGS='--e2e-rows all' for every row end to end.
bench-route:
	$(GO) build -o bin/loadreporter ./cmd/loadreporter
	$(GO) build -o bin/routebench ./cmd/routebench
	./bin/routebench --loadreporter bin/loadreporter $(ROUTEBENCH_ARGS)

# image builds the container image without a daemon (cmd/loadimage: the
# static binary alone on an empty base) and writes a tarball for
# `docker load < bin/loadreporter-image.tar` or `podman load -i …`.
.PHONY: image
image:
	$(GO) run ./cmd/loadimage --out bin/loadreporter-image.tar
