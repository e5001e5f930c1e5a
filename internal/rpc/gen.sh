#!/bin/sh
# gen.sh regenerates the Go code of internal/rpc/pb from its .proto files.
# Run from anywhere; `make proto` calls it. Needs protoc (v3.21 or newer) on
# PATH; installs the Go plugins at pinned versions when missing.
set -eu

PROTOC_GEN_GO_VERSION=v1.36.12
PROTOC_GEN_GO_GRPC_VERSION=v1.5.1

here=$(cd "$(dirname "$0")" && pwd)
gobin=$(go env GOBIN)
[ -n "$gobin" ] || gobin="$(go env GOPATH)/bin"
PATH="$gobin:$PATH"
export PATH

if ! command -v protoc >/dev/null 2>&1; then
	echo "gen.sh: protoc not found; install it (Debian: apt-get install protobuf-compiler)" >&2
	exit 1
fi
if ! protoc-gen-go --version 2>/dev/null | grep -q " $PROTOC_GEN_GO_VERSION\$"; then
	go install "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO_VERSION"
fi
if ! protoc-gen-go-grpc --version 2>/dev/null | grep -q " ${PROTOC_GEN_GO_GRPC_VERSION#v}\$"; then
	go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC_VERSION"
fi

cd "$here/pb"
protoc -I . \
	--go_out=. --go_opt=paths=source_relative \
	--go-grpc_out=. --go-grpc_opt=paths=source_relative \
	./*.proto
