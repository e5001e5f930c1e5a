#!/usr/bin/env bash
# One-thread metadata rates (create, stat, remove of FILES empty files in
# one directory, `weft bench meta`) on a 3-node x 4-drive local cluster:
# through its default mount (namespace write-back), through a second mount
# of the same cluster with --sync-dirops (every create and unlink committed
# before the reply), and on a raw directory of the same file system —
# alternating, ROUNDS rounds, in one run. Prints a markdown table of the
# runs and their means. Needs root (FUSE mounts).
#   BENCH_DIR  work directory (default: new dir under /var/tmp)
#   FILES      files per run (default 10000)
#   ROUNDS     rounds (default 3)
set -euo pipefail
cd "$(dirname "$0")/.."
work=${BENCH_DIR:-$(mktemp -d /var/tmp/weft-meta-bench.XXXXXX)}
files=${FILES:-10000}
rounds=${ROUNDS:-3}
mkdir -p "$work/raw" "$work/sync"
go build -o "$work/weft-bin" ./cmd/weft
weft="$work/weft-bin"

"$weft" local up --dir "$work/cluster" --mount "$work/wb" >"$work/up.log" 2>&1 &
up=$!
cleanup() {
  [ -n "${syncm:-}" ] && kill -TERM "$syncm" 2>/dev/null && wait "$syncm" 2>/dev/null
  kill -TERM $up 2>/dev/null || true
  wait $up 2>/dev/null || true
}
trap cleanup EXIT
for i in $(seq 1 120); do grep -q '^ready:' "$work/up.log" && break; sleep 1; done
grep -q '^ready:' "$work/up.log" || { cat "$work/up.log"; exit 1; }
admin=$(sed -n "s/^ready: admin=\(http:\/\/\)\{0,1\}\([^ ]*\).*/\2/p" "$work/up.log" | head -1)
"$weft" ${admin:+--admin "$admin"} mount --sync-dirops --log-level warn "$work/sync" >"$work/sync.log" 2>&1 &
syncm=$!
for i in $(seq 1 60); do grep -q '^mounted:' "$work/sync.log" && break; sleep 1; done
grep -q '^mounted:' "$work/sync.log" || { cat "$work/sync.log"; exit 1; }

for r in $(seq 1 "$rounds"); do
  for target in wb sync raw; do
    "$weft" bench meta --json --files "$files" "$work/$target" >"$work/meta-$target-$r.json"
  done
done

python3 - "$work" "$rounds" "$files" <<'PY'
import json, sys
work, rounds, files = sys.argv[1], int(sys.argv[2]), sys.argv[3]
names = {"wb": "weft, write-back (default)", "sync": "weft, --sync-dirops", "raw": "raw directory"}
print(f"| one thread, {files} files | create/s | stat/s | remove/s |")
print("|---|---|---|---|")
for t in ("wb", "sync", "raw"):
    runs = [json.load(open(f"{work}/meta-{t}-{r}.json")) for r in range(1, rounds + 1)]
    cell = lambda k: ", ".join("%.0f" % j[k] for j in runs) + " (mean **%.0f**)" % (sum(j[k] for j in runs) / len(runs))
    print(f"| {names[t]} | {cell('creates_per_s')} | {cell('stats_per_s')} | {cell('removes_per_s')} |")
PY
