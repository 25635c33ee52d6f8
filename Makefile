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
	cd deploy/helm && $(GO) test -count=1 -shuffle=on -timeout 5m ./...

bench: ## Go benchmarks
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

lint: ## gofmt, go vet
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) vet $(PKGS)
	cd deploy/helm && $(GO) vet ./...

# FUZZ: every fuzz target, as package:Target
FUZZ = server:FuzzRESP server:FuzzScanner policy:FuzzParse policy:FuzzParsePolicyJSON \
	policy:FuzzMatch lua:FuzzLuaAgreesWithGo lua:FuzzBatchAgreesWithGo limiter:FuzzMTake \
	cluster:FuzzKey httpfront:FuzzHTTPHandler rls:FuzzMapRequest envoycfg:FuzzParse \
	envoycfg:FuzzKeyInjective lua:FuzzCalendarAgreesWithGo

fuzz: ## run every fuzz target for FUZZTIME each (default 60s)
	@set -e; for t in $(FUZZ); do \
		echo "fuzz $$t"; \
		$(GO) test -run '^$$' -fuzz "^$${t#*:}$$" -fuzztime $${FUZZTIME:-60s} ./$${t%%:*}; \
	done

soak: ## sluice lab soak, 3 minutes of load with faults
	$(GO) run ./cmd/sluice lab soak

check-long: ## the cross-layer checker with the nemesis (internal/layercheck TestLayersNemesis) for LAYERCHECK_DURATION (default 10m), every violation recorded
	LAYERCHECK_DURATION=$${LAYERCHECK_DURATION:-10m} LAYERCHECK_KEEPGOING=1 $(GO) test -count=1 -v -run '^TestLayersNemesis$$' -timeout 30m ./internal/layercheck

ci: ## what CI runs
	.ci/run

cluster-up: ## a local 3+3 Redis Cluster on ports 7000-7005
	$(GO) run ./cmd/sluice cluster up

cluster-down: ## stop it
	$(GO) run ./cmd/sluice cluster down
