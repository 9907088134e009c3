# shoal — see README.md. `make demo` runs the real job on this machine (docs/demo.md), `make test` runs every test CI runs.
GO        ?= go
BIN       ?= bin
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS   := -s -w -X github.com/shoaldb/shoal/internal/version.Version=$(VERSION) -X github.com/shoaldb/shoal/internal/version.Revision=$(REVISION)
PKGS      := ./...

.PHONY: all build test deps unit e2e e2e-clean soak bench bench-fleet fuzz lint fmt vet staticcheck demo demo-fault demo-stop clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/shoal ./cmd/shoal

## test: everything CI runs: lint, unit and integration tests (real agents, real processes,
## real MariaDB, HAProxy, promtool, shellcheck). It first makes sure those are installed:
## as root with apt-get it installs what is missing (test/install-deps.sh), otherwise it
## fails with the list. The tests then run with CI=true, where a test that lacks a tool
## fails instead of skipping, and the run ends with every skipped test and its reason.
test: deps lint
	CI=true $(GO) run ./test/testsummary -- $(GO) test -race -count=1 -timeout 15m -json $(PKGS)

## deps: install (root + apt-get) or list (otherwise) what `make test` needs. What it
## installs gets no running or boot-enabled service (see test/install-deps.sh).
deps:
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		bash test/install-deps.sh test; \
	else \
		bash test/install-deps.sh --check test; \
	fi

## unit: the tests alone, as a developer runs them: tests whose tool is missing skip.
unit:
	$(GO) test -race -count=1 -timeout 15m $(PKGS)

## e2e: the fault suite in network namespaces (root; real MariaDB, HAProxy, iptables, stress-ng).
## It prints every line as it comes and ends with the last lines of each failed test.
e2e:
	$(GO) run ./test/testsummary -v -- $(GO) test -count=1 -tags e2e -json -timeout 20m ./test/e2e/

## e2e-clean: delete namespaces left by dead e2e runs (never those of a live run).
e2e-clean:
	SHOAL_E2E_CLEAN=1 $(GO) test -count=1 -tags e2e -v -run TestE2EClean ./test/e2e/

## soak: the soak test (root, like e2e): 3 db hosts and 2 app hosts in network namespaces, one
## random fault every 20-40 s for SOAK (default 1h), every invariant checked on every sample.
## SOAK_SEED replays a run (the seed is printed); SOAK_TIMEOUT is go test's -timeout (default
## SOAK + 15m). SOAK_FAULTS=silent-cut,link-cut draws only these fault kinds (default all).
## The agents run with writer terms (consensus keys); SOAK_CONSENSUS=0 runs them without.
## The report goes to build/soak/; a run of 1h or more also writes docs/soak.md.
SOAK         ?= 1h
SOAK_SEED    ?=
SOAK_FAULTS  ?=
SOAK_TIMEOUT ?= $(SOAK)15m
soak: SHELL := /bin/bash
soak:
	mkdir -p build/soak
	set -o pipefail; SOAK='$(SOAK)' SOAK_SEED='$(SOAK_SEED)' SOAK_FAULTS='$(SOAK_FAULTS)' $(GO) test -count=1 -tags e2e -v -run '^TestSoak$$' -timeout '$(SOAK_TIMEOUT)' ./test/e2e/ 2>&1 | tee build/soak/soak.log

## bench: the benchmark suites (root: network namespaces, MariaDB, HAProxy) and
## docs/benchmarks.md. Never fails on a timing. BENCH_QUICK=1: a few minutes.
## Suites 1, 3 and 4 are light and run side by side; suite 2 (CPUs
## saturated on purpose), suite 5 (1,000 agents), suite 7 (freshness:
## silent replication cuts, then the CPU cost of positions; then host-crash
## detection while the primary takes writes), suite 8
## (writer terms by consensus), suite 9 (switchover write outage) and the
## lease's cost each run alone.
BENCH_GO := $(GO) test -tags 'bench e2e' -count=1 -parallel 8 -v -timeout 90m
bench:
	bash test/install-deps.sh
	mkdir -p build/bench/bin
	rm -f build/bench/*.md build/bench/*.log
	CGO_ENABLED=0 $(GO) build -o build/bench/bin/stamp ./test/bench/stamp
	test -x build/bench/bin/serf || (cd /tmp && GOBIN=$(CURDIR)/build/bench/bin CGO_ENABLED=0 GOFLAGS= $(GO) install github.com/hashicorp/serf/cmd/serf@v0.11.0)
	@echo "== suites 1, 3, 4 (about 17 min; BENCH_QUICK=1: about 3)"
	( $(BENCH_GO) -run 'TestDetection' ./test/bench/ > build/bench/detection.log 2>&1; echo $$? > build/bench/detection.rc ) & \
	( $(BENCH_GO) -run 'TestClientImpact' ./test/bench/ > build/bench/client.log 2>&1; echo $$? > build/bench/client.rc ) & \
	$(BENCH_GO) -run 'TestMySQLFailure' ./test/bench/ > build/bench/mysql.log 2>&1; echo $$? > build/bench/mysql.rc; wait
	@echo "== suite 2 (10 min; BENCH_QUICK=1: 1)"
	$(BENCH_GO) -run 'TestFalseFailures' ./test/bench/ > build/bench/falsefail.log 2>&1; echo $$? > build/bench/falsefail.rc
	@echo "== suites 5, 6 (up to 14 min; BENCH_QUICK=1: about 2)"
	$(BENCH_GO) -run 'TestScale|TestMembersLatency' ./test/bench/ > build/bench/scale.log 2>&1; echo $$? > build/bench/scale.rc
	@echo "== suite 7 (about 35 min; BENCH_QUICK=1: about 8)"
	$(BENCH_GO) -run '^TestFreshness' ./test/bench/ > build/bench/freshness.log 2>&1; echo $$? > build/bench/freshness.rc
	@echo "== host-crash detection while the primary takes writes, N = 15 (about 6 min; BENCH_QUICK=1: about 2)"
	$(BENCH_GO) -run '^TestDetectionUnderWrites$$' ./test/bench/ > build/bench/detw.log 2>&1; echo $$? > build/bench/detw.rc
	@echo "== idle CPU per agent, 15 and 50 agents (about 6 min; BENCH_QUICK=1: about 3)"
	$(BENCH_GO) -run '^TestIdleCPU$$' ./test/bench/ > build/bench/idlecpu.log 2>&1; echo $$? > build/bench/idlecpu.rc
	$(BENCH_GO) -run '^TestConsensusTerms$$' ./test/bench/ > build/bench/consensus.log 2>&1; echo $$? > build/bench/consensus.rc
	$(BENCH_GO) -run '^TestSwitchoverOutage$$' ./test/bench/ > build/bench/switchover.log 2>&1; echo $$? > build/bench/switchover.rc
	$(BENCH_GO) -run '^TestFailoverOutage$$' ./test/bench/ > build/bench/failover.log 2>&1; echo $$? > build/bench/failover.rc
	@echo "== the writer lease's cost per agent, 15 and 50 agents (about 6 min; BENCH_QUICK=1: about 3)"
	$(BENCH_GO) -run '^TestLeaseCost$$' ./test/bench/ > build/bench/leasecost.log 2>&1; echo $$? > build/bench/leasecost.rc
	$(GO) run ./test/bench/report
	@for f in build/bench/*.rc; do echo "$$f: exit $$(cat $$f)"; done; ! grep -qv '^0$$' build/bench/*.rc

## bench-fleet: one agent process per network namespace at N = 15, 50, 100,
## profiles lan and fast (about 50 minutes; root); tables in
## build/bench/fleet/fleet.md for docs/scale.md. Not part of `make bench`.
## BENCH_FLEET_SIZES, _PROFILES, _IDLE, _TRIALS, _CUTS, _HEAL_TRIALS,
## _STAGGER narrow it (see test/bench/fleet_test.go).
bench-fleet:
	bash test/install-deps.sh
	BENCH_FLEET=1 $(BENCH_GO) -run 'TestFleet' ./test/bench/

## fuzz: every Fuzz target in the repository (found by go test -list, so new
## ones are included), one after the other, FUZZTIME each (default 1m); fails
## when any finds a crash (kept in that package's testdata/fuzz/FuzzName/).
## Not part of `make test`. FUZZFLAGS adds go test flags (e.g. -parallel 1).
FUZZTIME  ?= 1m
FUZZFLAGS ?=
fuzz:
	@set -e; found=0; \
	for dir in $$(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u); do \
		for t in $$($(GO) test -list '^Fuzz' $$dir | grep '^Fuzz'); do \
			found=$$((found+1)); \
			echo "== $$dir $$t ($(FUZZTIME))"; \
			$(GO) test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) $(FUZZFLAGS) $$dir; \
		done; \
	done; \
	if [ $$found -eq 0 ]; then echo "no fuzz targets found"; exit 1; fi; \
	echo "fuzz: $$found targets, no crash"

lint: fmt vet staticcheck

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## vet, staticcheck: once without build tags and once with every tag the
## tree uses (the e2e and bench suites), so no test code goes unchecked.
LINT_TAGS := e2e bench
vet:
	$(GO) vet $(PKGS)
	$(GO) vet -tags '$(LINT_TAGS)' $(PKGS)

staticcheck:
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 $(PKGS)
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 -tags '$(LINT_TAGS)' $(PKGS)

## demo: build and start, in the background on 127.0.0.1, three MariaDB servers (a
## primary, two GTID replicas), a shoal agent for each, an app agent driving HAProxy,
## and a load client (docs/demo.md). As root with apt-get it installs mariadb-server
## and haproxy if missing. DEMO_DIR (state, default .demo) and DEMO_PORT_BASE (default
## 13300: MariaDB base+1..3, HAProxy rw base+7, ro base+8, agents' HTTP base+21..24).
DEMO_DIR       ?= .demo
DEMO_PORT_BASE ?= 13300
DEMO           = $(BIN)/shoal-demo --dir '$(DEMO_DIR)' --port-base '$(DEMO_PORT_BASE)'
demo: build
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/shoal-demo ./cmd/shoal-demo
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then bash test/install-deps.sh demo; fi
	$(DEMO) up

## demo-fault: a narrated fault tour against the running demo, timed by the agents.
demo-fault:
	$(DEMO) tour

## demo-stop: stop every process the demo started, by PID; exit 1 naming any that did not stop cleanly.
demo-stop:
	$(DEMO) down

clean:
	rm -rf $(BIN) build .demo
