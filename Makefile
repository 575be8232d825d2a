# cairn: run `make help` for the targets.
SHELL := /usr/bin/env bash
.DEFAULT_GOAL := help

GO ?= go
# Timeout of `go test` per package; the first run builds and starts clusters.
TEST_TIMEOUT ?= 45m
# Seconds per fuzz target in `make test` and in `make fuzz`.
FUZZ_TIME ?= 10
FUZZ_TIME_LONG ?= 300
# State directory of the detached local cluster (cluster-up and demo share it).
DEMO_DIR ?= .demo
LOCALCLUSTER := $(GO) run ./test/localcluster
# make image: where to push (HOST[:PORT]/REPOSITORY:TAG), the cosign key to sign
# with (password in CAIRN_PASSWORD or COSIGN_PASSWORD; unsigned when empty), the
# platform's GOARCH, and the labels. The digest reference is also written to IMAGE_REF_FILE;
# the static binary the image holds is built to IMAGE_BIN.
IMAGE ?=
SIGN_KEY ?=
IMAGE_ARCH ?= $(shell $(GO) env GOARCH)
IMAGE_BIN ?= bin/cairn-linux-$(IMAGE_ARCH)
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
IMAGE_SOURCE ?= https://cairn.dev/cairn
IMAGE_REF_FILE ?= bin/image.ref
# make bench-fleet: the number of apps of the fleet, and where its output is kept.
M ?= 20
FLEET_LOG ?= test/bench/results/bench-fleet.log

.PHONY: help prereqs gitea flux build image test fuzz crds kube cluster-up cluster-down demo demo-down bench bench-fleet vet fmt

help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-13s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# Flags of every build of cairn: static (CGO_ENABLED=0, as the image has no libc)
# and stamped with VERSION, so make build and make image share the compiled packages.
BUILD_FLAGS = -trimpath -ldflags "-X main.version=$(VERSION)"

build: ## Build bin/cairn (static, CGO_ENABLED=0)
	CGO_ENABLED=0 $(GO) build $(BUILD_FLAGS) -o bin/cairn ./cmd/cairn

image: ## Build the static binary into an OCI image (no Docker), push it to IMAGE=host:port/repo:tag, sign with SIGN_KEY
	@if [ -z "$(IMAGE)" ]; then echo "make image: set IMAGE=HOST[:PORT]/REPOSITORY:TAG (and SIGN_KEY=cosign.key to sign)" >&2; exit 2; fi
	CGO_ENABLED=0 GOOS=linux GOARCH=$(IMAGE_ARCH) $(GO) build $(BUILD_FLAGS) -o $(IMAGE_BIN) ./cmd/cairn
	$(GO) run ./hack/image -binary $(IMAGE_BIN) -arch $(IMAGE_ARCH) -image $(IMAGE) \
		$(if $(SIGN_KEY),-sign-key $(SIGN_KEY)) -version $(VERSION) -revision $(REVISION) -source $(IMAGE_SOURCE) -ref-file $(IMAGE_REF_FILE)

prereqs: ## Check (in seconds) and install what is missing: etcd-server, docker-registry, git, make, gcc
	hack/prereqs.sh

kube: prereqs ## Build the Kubernetes binaries and kwok into ~/.cache/cairn (cached)
	hack/build-kube.sh

gitea: prereqs ## Build Gitea for the forge tests into ~/.cache/cairn (cached)
	hack/build-gitea.sh

flux: ## Build Flux source-controller and kustomize-controller (for bench-fleet) into ~/.cache/cairn (cached)
	hack/build-flux.sh

test: prereqs ## Run all tests against real Kubernetes binaries, then short fuzz runs
	GO=$(GO) TEST_TIMEOUT=$(TEST_TIMEOUT) hack/test.sh
	hack/fuzz.sh $(FUZZ_TIME)

fuzz: ## Run every fuzz target for FUZZ_TIME_LONG seconds (default 300)
	hack/fuzz.sh $(FUZZ_TIME_LONG)

crds: ## Regenerate deepcopy code and the CRDs in manifests/crds from api/
	$(GO) tool controller-gen object paths=./api/...
	$(GO) tool controller-gen crd paths=./api/... output:crd:dir=manifests/crds

cluster-up: prereqs ## Start (or reuse) the detached local cluster and registry in DEMO_DIR
	$(LOCALCLUSTER) up --dir $(DEMO_DIR) --full --registry

cluster-down: ## Stop the local cluster in DEMO_DIR
	$(LOCALCLUSTER) down --dir $(DEMO_DIR)

demo: prereqs build ## Local cluster, cairn installed, example modules pushed and synced
	DEMO_DIR=$(DEMO_DIR) hack/demo.sh

demo-down: ## Stop the demo cluster, its controller replicas (and the DEMO_GITEA=1 Gitea and cairn sync)
	@for p in $(DEMO_DIR)/pods/*.pid; do [ -s $$p ] && kill $$(cat $$p) 2>/dev/null; rm -f $$p; done; true
	@if [ -s $(DEMO_DIR)/cairn-sync.pid ]; then kill $$(cat $(DEMO_DIR)/cairn-sync.pid) 2>/dev/null || true; rm -f $(DEMO_DIR)/cairn-sync.pid; fi
	@if [ -d $(DEMO_DIR)/gitea ]; then $(GO) run ./test/localforge down --dir $(DEMO_DIR)/gitea; fi
	$(LOCALCLUSTER) down --dir $(DEMO_DIR)

bench: prereqs ## Run the benchmarks under test/bench
	@if [ -d test/bench ]; then \
		bin=$$(hack/build-kube.sh) && tools=$$(hack/bench-tools.sh) && \
		CAIRN_KUBE_BIN=$$bin CAIRN_BENCH_TOOLS=$$tools CAIRN_BENCH=1 $(GO) test -count=1 -v -run='^TestB' -bench=. -timeout=120m ./test/bench/...; \
	else \
		echo "no benchmarks yet (test/bench does not exist)"; \
	fi

bench-fleet: prereqs ## cairn's controller and Flux side by side on the fleet of M apps (M=20), each on a fresh cluster; builds Flux once (cached)
	@mkdir -p $(dir $(FLEET_LOG))
	bin=$$(hack/build-kube.sh) && flux=$$(hack/build-flux.sh) && \
	CAIRN_KUBE_BIN=$$bin CAIRN_FLUX_DIR=$$flux CAIRN_FLEET_M=$(M) CAIRN_BENCH=1 \
		$(GO) test -count=1 -v -run='^TestB6FluxFleet$$' -timeout=120m ./test/bench/ 2>&1 | tee $(FLEET_LOG); \
	rc=$${PIPESTATUS[0]}; [ $$rc = 0 ] || exit $$rc; \
	grep '^fleet M=' $(FLEET_LOG) | tail -1

vet: ## Run go vet
	$(GO) vet ./...

fmt: ## Format the Go code with gofmt -s
	gofmt -s -w $$(git ls-files --cached --others --exclude-standard -- '*.go')
