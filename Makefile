# sluice — make help lists the targets.
GO ?= go
PKGS ?= ./...

.PHONY: help build test bench lint fuzz soak check-long ci cluster-up cluster-down

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-13s %s\n", $$1, $$2}'

build: ## build ./sluice
	$(GO) build -o sluice ./cmd/sluice

test: ## the whole suite, against real Redis (installs redis-server when missing)
	@scripts/ensure-redis.sh >/dev/null
	$(GO) test -race -count=1 -shuffle=on -timeout 15m $(PKGS)

bench: ## Go benchmarks
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

lint: ## gofmt, go vet
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) vet $(PKGS)

fuzz: ## run every fuzz target for FUZZTIME each (default 60s)
	$(GO) test -run '^$$' -fuzz '^FuzzRESP$$' -fuzztime $${FUZZTIME:-60s} ./server
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $${FUZZTIME:-60s} ./policy
	$(GO) test -run '^$$' -fuzz '^FuzzParsePolicyJSON$$' -fuzztime $${FUZZTIME:-60s} ./policy
	$(GO) test -run '^$$' -fuzz '^FuzzMatch$$' -fuzztime $${FUZZTIME:-60s} ./policy
	$(GO) test -run '^$$' -fuzz '^FuzzLuaAgreesWithGo$$' -fuzztime $${FUZZTIME:-60s} ./lua
	$(GO) test -run '^$$' -fuzz '^FuzzBatchAgreesWithGo$$' -fuzztime $${FUZZTIME:-60s} ./lua
	$(GO) test -run '^$$' -fuzz '^FuzzMTake$$' -fuzztime $${FUZZTIME:-60s} ./limiter
	$(GO) test -run '^$$' -fuzz '^FuzzKey$$' -fuzztime $${FUZZTIME:-60s} ./cluster
	$(GO) test -run '^$$' -fuzz '^FuzzScanner$$' -fuzztime $${FUZZTIME:-60s} ./server
	$(GO) test -run '^$$' -fuzz '^FuzzHTTPHandler$$' -fuzztime $${FUZZTIME:-60s} ./httpfront
	$(GO) test -run '^$$' -fuzz '^FuzzMapRequest$$' -fuzztime $${FUZZTIME:-60s} ./rls
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $${FUZZTIME:-60s} ./envoycfg
	$(GO) test -run '^$$' -fuzz '^FuzzKeyInjective$$' -fuzztime $${FUZZTIME:-60s} ./envoycfg

soak: ## sluice lab soak, 3 minutes of load with faults
	$(GO) run ./cmd/sluice lab soak

check-long: ## the cross-layer checker (internal/layercheck) for LAYERCHECK_DURATION (default 10m), every violation recorded
	LAYERCHECK_DURATION=$${LAYERCHECK_DURATION:-10m} LAYERCHECK_KEEPGOING=1 $(GO) test -count=1 -v -run TestLayers -timeout 30m ./internal/layercheck

ci: ## what CI runs
	.ci/run

cluster-up: ## a local 3+3 Redis Cluster on ports 7000-7005
	$(GO) run ./cmd/sluice cluster up

cluster-down: ## stop it
	$(GO) run ./cmd/sluice cluster down
