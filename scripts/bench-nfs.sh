#!/usr/bin/env bash
# The NFS gateway against the FUSE mount, in one run on one cluster (3
# nodes x 4 drives, ec:4+2, `weft local up --nfs`): `weft bench throughput` and
# `weft bench meta` drive node n1's gateway (its own NFSv3 client: one TCP
# connection per job, UNSTABLE writes and a COMMIT, no client cache) and
# the cluster's FUSE mount (O_DIRECT, so that the page cache answers no
# read) with the same code. Per round and job count: sequential write and
# read of 1 MiB records, 4 KiB random read and write, create/stat/remove
# rates; the order of the targets alternates from round to round. The
# metadata rates are also taken on a second FUSE mount with --sync-dirops:
# the gateway commits every create and remove before it replies, as NFS
# requires, and the default mount acknowledges them first (write-back).
# Prints markdown tables of the means over the rounds, the NFS ÷ FUSE
# ratios, and each round's ratio. Needs root (the FUSE mount, drop_caches).
#   BENCH_DIR  work directory (default: new dir under /var/tmp)
#   SIZE       bytes of each job's file (default 256MiB)
#   JOBS       job counts (default "1 4")
#   RUNTIME    seconds of each random phase (default 10)
#   FILES      files of each metadata run (default 5000)
#   ROUNDS     rounds (default 2)
#   TESTS      from: io meta (default: both)
#   SETTLE     seconds to wait once weft has freed a run's blocks (default 5)
#   WEFT_BIN   a weft binary to measure instead of building this checkout
set -euo pipefail
cd "$(dirname "$0")/.."
work=${BENCH_DIR:-$(mktemp -d /var/tmp/weft-nfs-bench.XXXXXX)}
size=${SIZE:-256MiB}
jobsl=${JOBS:-1 4}
runtime=${RUNTIME:-10}
files=${FILES:-5000}
rounds=${ROUNDS:-2}
settle=${SETTLE:-5}
tests=" ${TESTS:-io meta} "
for t in $tests; do
  case $t in io|meta) ;; *) echo "bench-nfs: TESTS: unknown test '$t'; choose from io meta" >&2; exit 2 ;; esac
done
for v in "$runtime" "$files" "$rounds" "$settle" $jobsl; do
  [[ $v =~ ^[1-9][0-9]*$|^0$ ]] || { echo "bench-nfs: '$v' (RUNTIME, FILES, ROUNDS, SETTLE, JOBS) is not a whole number" >&2; exit 2; }
done
. scripts/lib/weft-bin.sh
weft=$(weft_bin bench-nfs "$work") || exit $?

"$weft" local up --dir "$work/cluster" --mount "$work/mnt" --nfs >"$work/up.log" 2>&1 &
up=$!
sync_mount=
cleanup() {
  [ -n "$sync_mount" ] && { kill -TERM $sync_mount 2>/dev/null || true; wait $sync_mount 2>/dev/null || true; }
  kill -TERM $up 2>/dev/null || true; wait $up 2>/dev/null || true
}
trap cleanup EXIT
for _ in $(seq 1 180); do grep -q '^nfs: n1 ' "$work/up.log" && break; kill -0 $up 2>/dev/null || break; sleep 1; done
grep -q '^nfs: n1 ' "$work/up.log" || { cat "$work/up.log"; echo "bench-nfs: the cluster did not come up" >&2; exit 1; }
admin=$(sed -n 's/^ready: admin=https\?:\/\/\([^ ]*\).*/\1/p' "$work/up.log")
url=$(sed -n 's/^nfs: n1 //p' "$work/up.log")
w() { "$weft" --admin "$admin" --pki "$work/cluster/pki" "$@"; }
# Root may write through the gateway as root (the default export squashes it).
w nfs export add / --clients 127.0.0.1 --no-root-squash >/dev/null
if [[ $tests == *" meta "* ]]; then
  mkdir -p "$work/mnt-sync"
  : >"$work/mount-sync.log"
  "$weft" --admin "$admin" --pki "$work/cluster/pki" mount --sync-dirops "$work/mnt-sync" >"$work/mount-sync.log" 2>&1 &
  sync_mount=$!
  for _ in $(seq 1 60); do grep -q '^mounted:' "$work/mount-sync.log" && break; sleep 1; done
  grep -q '^mounted:' "$work/mount-sync.log" || { cat "$work/mount-sync.log"; echo "bench-nfs: the --sync-dirops mount did not come up" >&2; exit 1; }
fi

# cleanslate waits until weft has freed the blocks of the files a run
# deleted (its deletes are done in the background): until used_bytes is 0,
# or has not changed for 15 s (bytes weft does not free, reported), or 300
# s; then SETTLE seconds, and drops the page cache (the drives' files are
# in it).
cleanslate() {
  local used last=-1 same=0
  for _ in $(seq 1 300); do
    used=$(w status --json | python3 -c 'import json,sys;print(json.load(sys.stdin)["used_bytes"])')
    [ "$used" -eq 0 ] && break
    if [ "$used" -eq "$last" ]; then same=$((same + 1)); else same=0; last=$used; fi
    [ $same -ge 15 ] && break
    sleep 1
  done
  [ "$used" -eq 0 ] || echo "bench-nfs: weft still holds $used bytes after the previous run's files were deleted" >&2
  sleep "$settle"
  sync
  echo 3 >/proc/sys/vm/drop_caches
}
target() { case $1 in nfs) echo "$url" ;; fuse) echo "$work/mnt" ;; fuse-sync) echo "$work/mnt-sync" ;; esac; }

for r in $(seq 1 "$rounds"); do
  case $((r % 3)) in 1) order="nfs fuse fuse-sync" ;; 2) order="fuse fuse-sync nfs" ;; 0) order="fuse-sync nfs fuse" ;; esac
  for jobs in $jobsl; do
    for t in $order; do
      if [[ $tests == *" io "* ]] && [ "$t" != fuse-sync ]; then
        echo "bench-nfs: round $r, $jobs jobs, $t: io" >&2
        cleanslate
        "$weft" bench throughput --json --jobs "$jobs" --size "$size" --runtime "${runtime}s" "$(target $t)" >"$work/io-$t-$jobs-$r.json"
      fi
      if [[ $tests == *" meta "* ]]; then
        echo "bench-nfs: round $r, $jobs jobs, $t: meta" >&2
        cleanslate
        "$weft" bench meta --json --jobs "$jobs" --files "$files" "$(target $t)" >"$work/meta-$t-$jobs-$r.json"
      fi
    done
  done
done

python3 - "$work" "$rounds" "$jobsl" "$tests" "$size" "$files" <<'PY'
import json, sys
work, rounds, jobsl, tests, size, files = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4].split(), sys.argv[5], sys.argv[6]
def load(kind, t, j, r):
    return json.load(open("%s/%s-%s-%s-%d.json" % (work, kind, t, j, r)))
def mean(xs):
    return sum(xs) / len(xs)
def fmt(x):
    return "%.0f" % x if x >= 100 else "%.1f" % x if x >= 10 else "%.2f" % x
if "io" in tests:
    print("| test | jobs | NFS MB/s | FUSE MB/s | NFS IOPS | FUSE IOPS | NFS ÷ FUSE | per round |")
    print("|---|---|---|---|---|---|---|---|")
    for test in ("seqwrite", "seqread", "randread", "randwrite"):
        for j in jobsl:
            v = {}
            for t in ("nfs", "fuse"):
                v[t] = [next(p for p in load("io", t, j, r)["phases"] if p["test"] == test) for r in range(1, rounds + 1)]
            per = [n["mb_per_s"] / f["mb_per_s"] for n, f in zip(v["nfs"], v["fuse"])]
            nm, fm = mean([p["mb_per_s"] for p in v["nfs"]]), mean([p["mb_per_s"] for p in v["fuse"]])
            print("| %s | %s | %s | %s | %.0f | %.0f | %.2f | %s |" % (test, j, fmt(nm), fmt(fm),
                  mean([p["iops"] for p in v["nfs"]]), mean([p["iops"] for p in v["fuse"]]), nm / fm,
                  " ".join("%.2f" % x for x in per)))
    print()
if "meta" in tests:
    print("| metadata, %s files | jobs | NFS ops/s | FUSE ops/s | FUSE --sync-dirops ops/s | NFS ÷ FUSE | NFS ÷ sync-dirops | per round (÷ sync-dirops) |" % files)
    print("|---|---|---|---|---|---|---|---|")
    for op, k in (("create", "creates_per_s"), ("stat", "stats_per_s"), ("remove", "removes_per_s")):
        for j in jobsl:
            n, f, s = ([load("meta", t, j, r)[k] for r in range(1, rounds + 1)] for t in ("nfs", "fuse", "fuse-sync"))
            print("| %s | %s | %.0f | %.0f | %.0f | %.2f | %.2f | %s |" % (op, j, mean(n), mean(f), mean(s), mean(n) / mean(f),
                  mean(n) / mean(s), " ".join("%.2f" % (a / b) for a, b in zip(n, s))))
PY
