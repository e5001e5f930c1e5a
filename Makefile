# weft — common tasks. `make help` lists them.
GO        ?= go
BIN       ?= bin/weft
DIR       ?= weft-data
TESTFLAGS ?= -count=1 -timeout 40m

.PHONY: help deps build local test test-unit vet bench proto clean

help:
	@echo "make local      install deps, build, run a 3-node local cluster in ./$(DIR) (Ctrl-C stops it)"
	@echo "make test       install deps, run every test (unit + cluster tests; WEFT_HARNESS=process|inprocess|both)"
	@echo "make test-unit  unit tests only (internal/...)"
	@echo "make vet        go vet + gofmt check"
	@echo "make bench      benchmarks (see docs/benchmarks.md)"
	@echo "make proto      regenerate gRPC code from internal/rpc/pb/*.proto"
	@echo "make build      build $(BIN)"

deps:
	@scripts/deps.sh

build:
	$(GO) build -o $(BIN) ./cmd/weft

local: deps build
	$(BIN) local up --dir $(DIR)

test: deps vet
	$(GO) test $(TESTFLAGS) ./...

test-unit:
	$(GO) test $(TESTFLAGS) ./internal/...

vet:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

bench:
	scripts/bench-drive.sh

proto:
	internal/rpc/gen.sh

clean:
	rm -rf bin
