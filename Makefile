# sandtrail — run `make` (or `make help`) to list the targets.
SHELL := /bin/bash
GO    ?= go
BIN   := bin
PKGS  := ./...
GOTESTFLAGS ?= -count=1 -timeout 25m

.DEFAULT_GOAL := help

# help lists every target that has a "## " description on its line (each
# must: test/makefile checks it), coloured only when stdout is a terminal.
.PHONY: help
help: ## List the targets
	@if [ -t 1 ]; then on=$$'\e[36m' off=$$'\e[0m'; else on='' off=''; fi; \
	grep -hE '^[a-zA-Z0-9_.-]+:.*## ' $(MAKEFILE_LIST) | \
	  awk -v on="$$on" -v off="$$off" 'BEGIN {FS = ":.*## "}; {printf "  %s%-10s%s %s\n", on, $$1, off, $$2}'

.PHONY: build
build: ## Build the binaries into bin/
	$(GO) build -o $(BIN)/ ./cmd/...

.PHONY: generate
generate: ## Regenerate the committed bpf2go output (needs clang, llvm, libbpf-dev, bpftool)
	scripts/deps.sh generate
	$(GO) generate ./collector/...

.PHONY: lint
lint: ## gofmt, go vet and go mod tidy check
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	@$(GO) mod tidy -diff || { echo "go.mod or go.sum is not tidy: run go mod tidy"; exit 1; }

.PHONY: deps
deps: ## Install what the tests need (Debian packages; idempotent)
	scripts/deps.sh test

.PHONY: test
test: deps lint ## Install what the tests need, then run every test (unit and end-to-end; run as root)
	$(GO) test $(GOTESTFLAGS) $(PKGS)

.PHONY: e2e
e2e: deps ## Run only the end-to-end tests under test/
	$(GO) test $(GOTESTFLAGS) ./test/...

.PHONY: kernels
kernels: ## Boot Debian's 5.10, 6.1 and 6.12 cloud kernels under qemu and check a recorded session on each (root); see docs/kernels.md
	scripts/deps.sh kernels
	$(GO) test $(GOTESTFLAGS) -run TestKernelMatrix -v ./test/kernels/

.PHONY: bench
bench: ## Run every benchmark (test/bench/run.sh) and regenerate the tables of docs/benchmarks.md and its charts in docs/bench/
	scripts/deps.sh bench
	test/bench/run.sh

.PHONY: install
install: ## Install sandtrail on this machine (root): binaries, config, keys, agent user
	./install.sh

.PHONY: demo
demo: ## Install what the demo needs (python3, pip, npm) and sandtrail, then run a recorded agent session on embedded defaults
	scripts/deps.sh demo
	$(MAKE) --no-print-directory install
	scripts/demo.sh

.PHONY: clean
clean: ## Remove build output
	rm -rf $(BIN)
