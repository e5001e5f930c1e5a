#!/usr/bin/env bash
# One-thread metadata rates (`weft bench meta`: create, stat, remove of FILES
# empty files in one directory) of two weft binaries — say the previous
# commit's and this one's — each on a fresh 3-node x 4-drive local cluster
# and its mount, alternating ROUNDS rounds of REPS runs, so that both see
# the same machine. Prints every run and the means with ratios (B ÷ A).
# Needs root (FUSE mounts).
#   usage: scripts/bench-meta-ab.sh BIN_A BIN_B
#   BENCH_DIR  work directory (default: new dir under /var/tmp)
#   FILES      files per run (default 10000)
#   ROUNDS     rounds (default 2)
#   REPS       runs per cluster start (default 3)
set -euo pipefail
if [ $# -ne 2 ] || [ ! -x "$1" ] || [ ! -x "$2" ]; then
  echo "usage: $0 BIN_A BIN_B   (two executable weft binaries, each built with go build -o FILE ./cmd/weft at the commit to compare)" >&2
  exit 2
fi
work=${BENCH_DIR:-$(mktemp -d /var/tmp/weft-meta-ab.XXXXXX)}
files=${FILES:-10000}
rounds=${ROUNDS:-2}
reps=${REPS:-3}
mkdir -p "$work"

# runs BIN NAME: a fresh cluster, REPS runs on its mount, appended to $work/runs.
runs() {
  local bin=$1 name=$2 dir="$work/$2" up
  rm -rf "$dir"
  mkdir -p "$dir"
  "$bin" local up --dir "$dir/cluster" --mount "$dir/mnt" >"$dir/up.log" 2>&1 &
  up=$!
  for _ in $(seq 1 120); do grep -q '^ready:' "$dir/up.log" && break; sleep 1; done
  grep -q '^ready:' "$dir/up.log" || { cat "$dir/up.log"; kill $up; exit 1; }
  sleep 5 # let the new cluster's own start-up work finish
  for _ in $(seq 1 "$reps"); do
    "$bin" bench meta --json --files "$files" "$dir/mnt" | python3 -c '
import json, sys
j = json.load(sys.stdin)
print(sys.argv[1], round(j["creates_per_s"]), round(j["stats_per_s"]), round(j["removes_per_s"]))' "$name" >>"$work/runs"
  done
  kill -TERM $up
  wait $up 2>/dev/null || true
}

: >"$work/runs"
for _ in $(seq 1 "$rounds"); do
  runs "$1" A
  runs "$2" B
done
python3 - "$work/runs" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1])]
print("| | A runs | A mean | B runs | B mean | B ÷ A |")
print("|---|---|---|---|---|---|")
for i, op in enumerate(("creates/s", "stats/s", "removes/s")):
    a = [int(r[i + 1]) for r in rows if r[0] == "A"]
    b = [int(r[i + 1]) for r in rows if r[0] == "B"]
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    print("| %s | %s | %.0f | %s | %.0f | %.2f |" % (op, ", ".join(map(str, a)), ma, ", ".join(map(str, b)), mb, mb / ma))
PY
