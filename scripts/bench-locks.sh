#!/bin/sh
# bench-locks.sh: lock+unlock round trips (fcntl F_SETLK and flock) through
# a weft mount of a one-node local cluster, against the same on a local
# directory (the kernel's own locks), in one run (tests/locks_test.go,
# BenchmarkLocks). Usage: scripts/bench-locks.sh [benchtime, default 3s]
set -eu
cd "$(dirname "$0")/.."
exec go test ./tests/ -run '^$' -bench '^BenchmarkLocks$' -benchtime "${1:-3s}" -count 1
