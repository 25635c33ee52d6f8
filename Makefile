# sluice — make help lists the targets.
GO ?= go
PKGS ?= ./...
MODULE = github.com/sluice-rl/sluice

.PHONY: help build unit test bench lint fuzz soak check-long ci cluster-up cluster-down release

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-13s %s\n", $$1, $$2}'

build: ## build ./sluice (the server) and ./sluice-lab (bench, labs, cluster up|down)
	$(GO) build -o sluice ./cmd/sluice
	$(GO) build -o sluice-lab ./cmd/sluice-lab

# MODULES: the tree's Go modules besides the root's, each tested and linted
# from its own folder.
MODULES = deploy/helm client

# The unit tier: every test that needs a real store (redis-server, a
# cluster, Sentinel), Redis's tools, root (network namespaces), podman or a
# sluice binary talking to Redis skips under -short, saying what it needs
# (internal/redistest.SkipShort). What stays may listen on 127.0.0.1:0 and
# run a sluice binary built from the tree in embedded mode: processes of the
# test's own, on loopback, nothing from outside.
unit: ## fast tests, no Redis, root, podman or network beyond the tests' own loopback listeners (-short; under a minute)
	$(GO) test -short -count=1 -shuffle=on $(PKGS)
	@for m in $(MODULES); do echo "cd $$m && $(GO) test -short -count=1 -shuffle=on ./..."; \
		(cd $$m && $(GO) test -short -count=1 -shuffle=on ./...) || exit 1; done

# deploy/compose runs alone, after the rest: its image builds and eight
# containers beside the cluster tests made their 50ms store timeouts late.
# deploy/helm and client are modules of their own, which ./... stops at.
test: ## the whole suite, against real Redis (installs redis-server when missing)
	@scripts/ensure-redis.sh >/dev/null
	$(GO) test -race -count=1 -shuffle=on -timeout 15m $$($(GO) list $(PKGS) | grep -vxF $(MODULE)/deploy/compose)
	$(GO) test -count=1 -timeout 10m ./deploy/compose
	cd deploy/helm && $(GO) test -count=1 -shuffle=on -timeout 5m ./...
	cd client && $(GO) test -race -count=1 -shuffle=on -timeout 10m ./...

bench: ## Go benchmarks
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

# STATICCHECK: the staticcheck lint runs, at the version it is clean with;
# go run fetches it through the module proxy on first use.
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2

lint: ## gofmt, go vet and staticcheck, over every module
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) vet $(PKGS)
	$(STATICCHECK) $(PKGS)
	@for m in $(MODULES); do echo "cd $$m && $(GO) vet ./... && $(STATICCHECK) ./..."; \
		(cd $$m && $(GO) vet ./... && $(STATICCHECK) ./...) || exit 1; done

# FUZZ: every fuzz target, as package:Target
FUZZ = server:FuzzRESP server:FuzzScanner policy:FuzzParse policy:FuzzParsePolicyJSON \
	policy:FuzzMatch lua:FuzzLuaAgreesWithGo lua:FuzzBatchAgreesWithGo limiter:FuzzMTake \
	cluster:FuzzKey cluster:FuzzReplyParser httpfront:FuzzHTTPHandler rls:FuzzMapRequest envoycfg:FuzzParse \
	envoycfg:FuzzKeyInjective lua:FuzzCalendarAgreesWithGo internal/ratelimitheader:FuzzParseField internal/ratelimitheader:FuzzValuesParse

fuzz: ## run every fuzz target for FUZZTIME each (default 60s)
	@set -e; for t in $(FUZZ); do \
		echo "fuzz $$t"; \
		$(GO) test -run '^$$' -fuzz "^$${t#*:}$$" -fuzztime $${FUZZTIME:-60s} ./$${t%%:*}; \
	done

soak: build ## sluice-lab soak, 3 minutes of load with faults
	./sluice-lab soak

check-long: ## the cross-layer checker with the nemesis (internal/layercheck TestLayersNemesis) for LAYERCHECK_DURATION (default 10m), every violation recorded
	LAYERCHECK_DURATION=$${LAYERCHECK_DURATION:-10m} LAYERCHECK_KEEPGOING=1 $(GO) test -count=1 -v -run '^TestLayersNemesis$$' -timeout 30m ./internal/layercheck

bench-table: ## the README's bench table by sluice-lab bench --ab, A B A B of the sluice binaries OLD= and NEW= (scripts/bench-table.sh; ARGS= more flags)
	scripts/bench-table.sh $(OLD) $(NEW) $(ARGS)

ci: ## what CI runs
	.ci/run

cluster-up: ## sluice-lab cluster up: a local 3+3 Redis Cluster on ports 7000-7005
	$(GO) run ./cmd/sluice-lab cluster up

cluster-down: ## sluice-lab cluster down: stop it
	$(GO) run ./cmd/sluice-lab cluster down

# VERSION: the release's version, stamped into the binaries (main.version)
# and their file names; by default what git describe says of the checkout.
VERSION ?= $(shell git describe --tags --always --dirty)
# RELEASE_PLATFORMS: GOOS/GOARCH pairs make release builds. The commit, its
# time and the dirty flag are stamped too (main.revision, main.commitTime,
# main.modified): Go stamps them itself only in a checkout whose .git is a
# directory, not in a git worktree, and its own record wins when present.
RELEASE_PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64

release: ## cross-build dist/sluice-<version>-<os>-<arch>.tar.gz (binary, LICENSE, NOTICE, README.md, CHANGELOG.md) for linux and darwin on amd64 and arm64, and dist/SHA256SUMS
	@case "$(VERSION)" in ""|*[!A-Za-z0-9._+-]*) echo "make release: VERSION '$(VERSION)' is empty or has a character outside A-Za-z0-9._+-" >&2; exit 1;; esac
	@set -e; rm -rf dist; mkdir -p dist; \
	mtime=$$(git log -1 --format=%ct 2>/dev/null || echo 0); \
	rev=$$(git rev-parse HEAD 2>/dev/null || true); when=$$(git log -1 --format=%cI 2>/dev/null || true); \
	dirty=false; test -z "$$(git status --porcelain 2>/dev/null)" || dirty=true; \
	for p in $(RELEASE_PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; name=sluice-$(VERSION)-$$os-$$arch; \
		echo "build $$name"; mkdir dist/$$name; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -buildvcs=true \
			-ldflags "-s -w -X main.version=$(VERSION) -X main.revision=$$rev -X main.commitTime=$$when -X main.modified=$$dirty" \
			-o dist/$$name/sluice ./cmd/sluice; \
		cp LICENSE NOTICE README.md CHANGELOG.md dist/$$name/; \
		tar -C dist --sort=name --mtime=@$$mtime --owner=0 --group=0 --numeric-owner -cf - $$name | gzip -n -9 > dist/$$name.tar.gz; \
		rm -r dist/$$name; \
	done; \
	cd dist && sha256sum sluice-*.tar.gz > SHA256SUMS && cat SHA256SUMS
