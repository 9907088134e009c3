# shoal — see README.md. `make demo` runs a local 3-agent cluster, `make test` runs every test CI runs.
GO        ?= go
BIN       ?= bin
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS   := -s -w -X github.com/shoaldb/shoal/internal/version.Version=$(VERSION) -X github.com/shoaldb/shoal/internal/version.Revision=$(REVISION)
PKGS      := ./...

.PHONY: all build test unit e2e e2e-clean bench lint fmt vet staticcheck demo demo-stop clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/shoal ./cmd/shoal

## test: everything CI runs: lint, unit and integration tests (real agents, real processes).
test: lint unit

unit:
	$(GO) test -race -count=1 -timeout 15m $(PKGS)

## e2e: the fault suite in network namespaces (root; see test/e2e).
## e2e: the fault suite in network namespaces (root; real MariaDB, HAProxy, iptables, stress-ng).
e2e:
	$(GO) test -count=1 -tags e2e -v -timeout 20m ./test/e2e/

## e2e-clean: delete namespaces left by dead e2e runs (never those of a live run).
e2e-clean:
	SHOAL_E2E_CLEAN=1 $(GO) test -count=1 -tags e2e -v -run TestE2EClean ./test/e2e/

## bench: measurements, written as a report; never fails on a timing.
bench:
	mkdir -p build
	SHOAL_MEASURE=1 SHOAL_MEASURE_TRIALS=$${SHOAL_MEASURE_TRIALS:-10} SHOAL_MEASURE_OUT=build/detection.md \
		SHOAL_MEASURE_OUT_POOL=build/pool-removal.md SHOAL_MEASURE_OUT_HOOKS=build/hook-delay.md \
		$(GO) test -count=1 -run 'TestDetectionTimes|TestPoolRemovalTimes|TestHookDelay' -v -timeout 60m ./internal/agent/
	@cat build/detection.md build/pool-removal.md build/hook-delay.md

lint: fmt vet staticcheck

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

staticcheck:
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 $(PKGS)

## demo: build and start a 3-agent cluster on 127.0.0.1, then show `shoal members`.
demo: build
	./deploy/demo/demo.sh start

demo-stop:
	./deploy/demo/demo.sh stop

clean:
	rm -rf $(BIN) build .demo
