# Everything a developer or CI runs. `make demo` and `make test` are the two
# commands the README starts with.

GO        ?= go
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
DATE      := $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS   := -X main.version=$(VERSION) -X main.dateBuilt=$(DATE)
BIN       := bin
EMULATORS := .cache/emulators

.PHONY: all build emulators demo test unit lint config-test bench fuzz clean

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
	$(GO) run ./internal/emulator/install

# The main job: a local Kinesis (the in-process fake, standalone) with a
# producer writing to it, and a Benthos pipeline reading it to stdout.
demo: build
	@./config/demo.sh

# All the tests: formatting, vet, unit and integration tests (they start the
# emulators themselves on loopback), and the example configs' tests.
test: emulators lint unit config-test

lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...

unit:
	$(GO) test -race -timeout 20m ./...

config-test: $(BIN)/benthos-kinesis
	$(BIN)/benthos-kinesis lint -r './resources/*.yaml' ./config/*.yaml
	$(BIN)/benthos-kinesis test -r './resources/*.yaml' ./config/...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzUnpack -fuzztime 60s ./internal/kpl

clean:
	rm -rf $(BIN)
