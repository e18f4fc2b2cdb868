# Lathe. `make run` starts the daemon on the embedded defaults; `make test`
# installs what the tests need and runs every test.

GO       ?= go
BIN      := bin
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X main.version=$(VERSION)

.PHONY: all build run test vet bench fuzz chaos soak clean

include runtime/sandbox/sandbox.mk
include web/web.mk

all: build

# Static (no cgo): the binary is also Lathe's helper inside every sandbox
# (`lathe sandbox-helper`), which must run in any image, libc or none.
build:
	CGO_ENABLED=0 $(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/lathe ./cmd/lathe

# make run ARGS='--config docs/examples/lathe.yaml --listen 127.0.0.1:9000' passes flags to lathe serve.
run: build
	./$(BIN)/lathe serve $(ARGS)

vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...

# The sandbox tests need containerd and the sandbox image: containerd-up
# installs and starts them on a fresh machine (once; fast afterwards), and
# docker-up a Docker Engine beside it for the remote provider. The
# browser tests need Chromium and playwright-core: browser-up. -p 1 runs one
# package at a time: the browser, chaos and sandbox tests each load both
# cores, and beside each other they time out on a 2-core machine. Then the
# remote provider's tests again, as an ordinary user on rootless Podman
# (test-podman: podman-up makes the user and its engine; under 3 minutes).
test: vet containerd-up docker-up browser-up
	$(GO) test -race -count=1 -p 1 -timeout 25m ./...
	@$(MAKE) --no-print-directory test-podman

# Benchmarks with the figures the issues name. Each prints its own metrics.
BENCHTIME ?= 3s
bench: build docker-up
	$(GO) test -run '^$$' -bench 'BenchmarkAppend' -benchtime $(BENCHTIME) ./journal/
	$(GO) test -run '^$$' -bench 'Verify1M' -benchtime 1x -timeout 20m ./journal/
	$(GO) test -run '^$$' -bench 'Replay1M|RestartWithCheckpoint' -benchtime 3x -timeout 30m ./projections/
	$(GO) test -run '^$$' -bench 'Snapshot10k' ./projections/
	$(GO) test -run '^$$' -bench 'SessionHistory10k' -benchtime 20x ./projections/
	$(GO) test -run '^$$' -bench 'BenchmarkHub' -benchtime 1x -timeout 10m ./transport/
	$(GO) test -run '^$$' -bench 'BenchmarkGatewayChunk' -benchtime 1000x ./runtime/gateway/
	$(GO) test -run '^$$' -bench 'PrepareReady' -benchtime 20x ./runtime/sandbox/containerd/
	$(GO) test -run '^$$' -bench 'TwentySandboxes' -benchtime 1x ./runtime/sandbox/containerd/
	$(GO) test -run '^$$' -bench 'DockerReady' -benchtime 20x ./runtime/sandbox/docker/
	$(GO) test -run '^$$' -bench 'DockerExec|DockerDial' -benchtime 200x ./runtime/sandbox/docker/
	$(GO) test -run '^$$' -bench 'DockerCopyIn50k' -benchtime 3x -timeout 20m ./runtime/sandbox/docker/
	$(GO) test -run '^$$' -bench 'DockerSeed50k' -benchtime 3x -timeout 30m ./runtime/sandbox/docker/
	$(GO) test -run '^$$' -bench 'DockerTenSandboxes' -benchtime 1x ./runtime/sandbox/docker/
	$(GO) test -run '^$$' -bench 'ReadFile100K|TerminalEcho' -benchtime 2000x ./cmd/lathe/internal/daemon/
	$(GO) test -run '^$$' -bench '^BenchmarkCreateToReady$$' -benchtime 20x ./cmd/lathe/internal/daemon/
	$(GO) test -run '^$$' -bench 'PreviewThroughput|PreviewDownload1GiB' -benchtime 1x ./cmd/lathe/internal/daemon/
	$(GO) test -run '^$$' -bench 'BenchmarkTurn' -benchtime 1x -timeout 20m ./cmd/lathe/internal/daemon/
	$(GO) test -run '^$$' -bench 'BenchmarkTelemetryFifty' -benchtime 4x -timeout 20m ./cmd/lathe/internal/daemon/
	$(GO) test -run '^$$' -bench 'GitStatus50k' -benchtime 40x ./cmd/lathe/internal/daemon/
	$(GO) test -run '^$$' -bench 'Seed50k' -benchtime 3x -timeout 30m ./runtime/git/
	$(GO) test -run '^$$' -bench 'RemoteCreateToReady' -benchtime 20x ./cmd/lathe/internal/daemon/
	$(GO) test -run '^$$' -bench 'RemoteTenReady' -benchtime 2x -timeout 20m ./cmd/lathe/internal/daemon/
	$(GO) test -run '^$$' -bench 'RemotePreviewRPS' -benchtime 1x -timeout 20m ./cmd/lathe/internal/daemon/
	$(GO) test -run '^$$' -bench 'WorktreeCreateToReady50k' -benchtime 5x -timeout 20m ./cmd/lathe/internal/daemon/
	$(GO) test -run '^$$' -bench 'Merge1000Files' -benchtime 10x ./cmd/lathe/internal/daemon/
	$(GO) test -run '^$$' -bench 'MCPCallOverhead' -benchtime 2000x ./runtime/mcp/
	$(GO) test -run '^$$' -bench 'SweepHost' -benchtime 200x ./runtime/hooks/
	$(GO) test -run '^$$' -bench 'ApprovalFrame100' -benchtime 100x ./cmd/lathe/internal/daemon/
	$(GO) test -run '^$$' -bench 'BenchmarkAutomation' -benchtime 3x -timeout 10m ./cmd/lathe/internal/daemon/
	$(GO) test -run '^$$' -bench 'ChatSearch10k' ./projections/
	$(GO) test -run '^$$' -bench 'ChatTokenLatency' -benchtime 1x ./cmd/lathe/internal/daemon/
	$(GO) test -run '^$$' -bench 'Upload25MiB' -benchtime 3x ./cmd/lathe/internal/daemon/
	$(GO) test -run '^$$' -bench 'Lattice8On4' -benchtime 20x ./cmd/lathe/internal/daemon/
	$(GO) test -run '^$$' -bench 'WaysLaneStart50k' -benchtime 1x -timeout 20m ./cmd/lathe/internal/daemon/
	$(GO) test -run '^$$' -bench 'WaysKeep1000' -benchtime 3x -timeout 10m ./cmd/lathe/internal/daemon/
	$(GO) test -run '^$$' -bench 'BenchmarkOutsideAgent' -benchtime 20x -timeout 20m ./cmd/lathe/internal/daemon/
	$(GO) build -o $(BIN)/lathe-load ./cmd/lathe-load
	./$(BIN)/lathe-load -lathe $(CURDIR)/$(BIN)/lathe -clients 64 -duration 5s -baseline
	./$(BIN)/lathe-load -lathe $(CURDIR)/$(BIN)/lathe -scenario restart -sessions 50000 -events 1000000 -restarts 5

# Run every fuzz target for FUZZTIME each (the seeds also run in `make test`).
FUZZTIME ?= 60s
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

# The chaos driver (cmd/lathe/chaos_process_test.go): a mixed load with
# CHAOS_KILLS SIGKILLs at random moments, checked after each restart; it
# prints a table. `make test` runs it with 10 kills.
CHAOS_KILLS ?= 50
chaos: containerd-up
	$(GO) test -count=1 -timeout 60m -run '^TestChaosKill9$$' -v ./cmd/lathe/ -args -chaos.kills=$(CHAOS_KILLS)

# The soak: the chaos load without kills for SOAK_DURATION, sampled every
# minute (RSS, open files, threads, journal bytes per event), with a verdict.
SOAK_DURATION ?= 1h
soak: containerd-up
	$(GO) test -count=1 -timeout 0 -run '^TestSoak$$' -v ./cmd/lathe/ -args -soak.duration=$(SOAK_DURATION)

clean:
	rm -rf $(BIN)
