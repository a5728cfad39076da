# Everything a developer or CI runs. `make demo` and `make test` are the two
# commands the README starts with.

GO        ?= go
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
DATE      := $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS   := -X main.version=$(VERSION) -X main.dateBuilt=$(DATE)
BIN       := bin
EMULATORS := .cache/emulators

.PHONY: all build emulators demo test unit lint config-test modules docs bench bench-leases sim sim-scale fuzz clean

all: build

build: $(BIN)/benthos-kinesis $(BIN)/kinesis-emulator

$(BIN)/benthos-kinesis: FORCE
	$(GO) build -ldflags "$(LDFLAGS)" -o $@ ./cmd/benthos-kinesis

$(BIN)/kinesis-emulator: FORCE
	$(GO) build -o $@ ./cmd/kinesis-emulator

FORCE:

# The npm emulators the integration tests start: kinesis-local (kinesis-mock)
# and dynalite, installed once under .cache/emulators.
emulators:
	$(GO) run ./cmd/install-emulators

# The main job: a local Kinesis (the in-process fake run standalone, serving
# HTTP/2 over TLS as AWS does) with a producer writing order events to it, and
# a Benthos pipeline reading it by Enhanced Fan-Out to stdout. Ctrl-C stops
# both. DEMO_SECONDS=n stops it after n seconds.
DEMO := .cache/demo
demo: build
	@rm -rf $(DEMO) && mkdir -p $(DEMO)
	@$(BIN)/kinesis-emulator -listen 127.0.0.1:0 -tls -tls-cert-file $(DEMO)/ca.pem \
		-streams orders:4 -produce orders:20 -consumer-activation-delay 1s -log-level warn \
		> $(DEMO)/endpoint 2> $(DEMO)/emulator.log & \
	emulator=$$!; trap 'kill $$emulator 2>/dev/null; wait $$emulator 2>/dev/null' EXIT INT TERM; \
	for i in $$(seq 100); do [ -s $(DEMO)/endpoint ] && break; sleep 0.1; done; \
	if [ ! -s $(DEMO)/endpoint ]; then echo "the emulator did not start:"; cat $(DEMO)/emulator.log; exit 1; fi; \
	echo "Local Kinesis at $$(cat $(DEMO)/endpoint): stream orders (4 shards), 20 order events/s, some KPL-aggregated."; \
	echo "Reading it by Enhanced Fan-Out. Ctrl-C to stop."; \
	KINESIS_ENDPOINT=$$(cat $(DEMO)/endpoint) KINESIS_CA_FILE=$(DEMO)/ca.pem KINESIS_CHECKPOINT_DIR=$(DEMO)/checkpoints \
		$(if $(DEMO_SECONDS),timeout -s INT $(DEMO_SECONDS)) $(BIN)/benthos-kinesis run -r './resources/*.yaml' config/demo.yaml || true

# All the tests: formatting, vet, unit and integration tests (they start the
# emulators themselves on loopback), and the example configs' tests.
test: emulators lint unit config-test modules

lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./... ./cmd/benthos-kinesis/testdata/memload

# Most tests wait on the network, timers and child processes rather than
# the CPU: four at a time per package keeps both cores busy. A binary built
# with -race sleeps a second when it exits unless told otherwise (GORACE
# atexit_sleep_ms): every test binary and the children some tests start.
# The simulation of the lease coordination (500 schedules) runs without
# -race: it runs one goroutine at a time by construction, and the race
# detector would only make it five times slower. The binary's tests (many
# processes with dynalite, whose takeovers are timed against lease periods
# of 2 s) run after the other packages rather than beside them: beside the
# input's tests on two cores, dynalite's answers took the 2 s takeover past
# its bound of 1.5 lease periods (3.02-3.12 s; alone 2.0-2.8 s).
UNIT_PKGS = $(shell $(GO) list ./... | grep -v '/cmd/benthos-kinesis$$')
unit:
	GORACE="atexit_sleep_ms=0 $$GORACE" $(GO) test -race -parallel 4 -timeout 20m -skip 'TestSimulation$$|TestSimulationAtScale$$' $(UNIT_PKGS)
	GORACE="atexit_sleep_ms=0 $$GORACE" $(GO) test -race -parallel 4 -timeout 20m ./cmd/benthos-kinesis
	$(GO) test -count=1 -timeout 10m -run 'TestSimulation$$|TestSimulationAtScale$$' ./input/leasecoord

RESOURCES := $(addprefix -r ,$(wildcard resources/*.yaml))
config-test: $(BIN)/benthos-kinesis
	$(BIN)/benthos-kinesis lint $(RESOURCES) ./config/*.yaml $(wildcard resources/*.yaml)
	$(BIN)/benthos-kinesis test $(RESOURCES) ./config/...

# The modules beside the main one: the Kubernetes manifests, whose test
# decodes them into the Kubernetes API types (kept out of the main module),
# and the example of a Benthos binary of your own with the input in it.
modules:
	cd config/deploy && $(GO) vet ./... && $(GO) test ./...
	cd cmd/example-own-binary && $(GO) vet ./... && $(GO) build -o /dev/null .

# The input's documentation, generated from its config spec.
docs:
	$(GO) test ./input -run TestDocsAreGenerated -update-docs

# Benchmarks: the input against a bare aws-sdk-go-v2 loop over the same
# in-process fake, reported as ratios (Go benchmarks, then the bench command).
bench:
	$(GO) test -run '^$$' -bench 'Baseline|Input' -benchtime 3x ./input
	$(GO) test -run '^$$' -bench . -benchmem ./internal/kpl
	$(GO) run ./cmd/kinesis-bench -rounds 5

# The lease table at scale: 16 inputs sharing 1,024 shards in one process
# (fake Kinesis, dynalite): time to balance, DynamoDB calls, units and cost
# by operation and class of item, with idle shards and with every shard
# written and checkpointed every second (Busy).
bench-leases:
	$(GO) test -run '^$$' -bench 'BenchmarkLeaseTableScale$$|BenchmarkLeaseTableScaleBusy$$' -benchtime 1x -timeout 30m ./input

# The deterministic simulation of the lease coordination (input/leasecoord,
# sim_test.go): SIM_COUNT schedules from seed SIM_FIRST on every core, each
# checking its invariants at every step. `make test` runs 500 of them; a
# failure names its seed, and -sim.seed=N replays it with debug logs.
SIM_COUNT ?= 100000
SIM_FIRST ?= 1
sim:
	$(GO) test -count=1 -timeout 12h -run 'TestSimulation$$' -v ./input/leasecoord -sim.count=$(SIM_COUNT) -sim.first=$(SIM_FIRST)

# The lease coordination at internet scale, in virtual time: 10,000 idle
# shards over 100 processes at lease_period 10s (make test runs 2,000 over
# 20): time to balance from a common start, steady-state DynamoDB units and
# cost against KCL's for the same fleet, takeover after a crash, and how
# soon each take, ask and handover shows in the other processes' views;
# and 1,024 busy shards over 16 (make test: 256 over 8), checkpointed
# every second: the checkpoints' cost apart from the rest, and no scan.
sim-scale:
	$(GO) test -count=1 -timeout 30m -run 'TestSimulationAtScale(Busy)?$$' -v ./input/leasecoord -sim.scale.shards=10000 -sim.scale.instances=100 -sim.scale.busy.shards=1024 -sim.scale.busy.instances=16

# FUZZTIME per target: make fuzz FUZZTIME=1h for a long run.
FUZZTIME ?= 60s
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzUnpack -fuzztime $(FUZZTIME) ./internal/kpl
	# Without coverage guidance: a Benthos binary instrumented for it runs a
	# few configs a minute, plain about twenty a second.
	$(GO) test -c -o $(BIN)/input.test ./input
	cd input && ../$(BIN)/input.test -test.run '^$$' -test.fuzz FuzzLintAgreesWithRun -test.fuzztime $(FUZZTIME) -test.fuzzcachedir ../.cache/fuzz

clean:
	rm -rf $(BIN)
