#!/usr/bin/env bash
# The read rows of ../shared/bench/bench-side-by-side.sh (the same fio
# commands: 1 MiB sequential reads of SIZE per job, 4 KiB random reads of
# RUNTIME s on the same files, caches dropped before each) on a raw
# directory, a go-fuse loopback mount of it (`weft bench loopback`, FUSE's
# own ceiling on this machine) and a `weft local up` mount (3 nodes x 4
# drives, ec:4+2), in one run, so that the ratios compare like with like on
# a loaded machine. Prints a markdown table. Needs root (drop_caches,
# mounts) and fio.
#   BENCH_DIR  work directory (default: new dir under /var/tmp)
#   SIZE       bytes per fio job (default 1g)
#   RUNTIME    seconds of each random test (default 20)
#   JOBS       job counts (default "1 4")
#   TARGETS    which of raw loop weft (default all three)
#   WEFT_BIN   a weft binary to measure instead of building this checkout
#   PPROF      if set (ADDR), the weft mount is a separate `weft mount` with
#              --metrics ADDR --pprof, for profiles while the test runs
#   KEEP       1: leave the cluster and the directories in BENCH_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
work=${BENCH_DIR:-$(mktemp -d /var/tmp/weft-reads-bench.XXXXXX)}
size=${SIZE:-1g}
runtime=${RUNTIME:-20}
jobsl=${JOBS:-1 4}
targets=${TARGETS:-raw loop weft}
. scripts/lib/weft-bin.sh
weft=$(weft_bin bench-reads "$work") || exit $?

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  [ "${KEEP:-0}" = 1 ] || rm -rf "$work/cluster" "$work/raw" "$work/loopsrc"
}
trap cleanup EXIT
mkdir -p "$work/raw" "$work/loopsrc" "$work/loop" "$work/weft"
if [[ " $targets " == *" weft "* ]]; then
  if [ -n "${PPROF:-}" ]; then
    "$weft" local up --dir "$work/cluster" --mount "" >"$work/up.log" 2>&1 &
  else
    "$weft" local up --dir "$work/cluster" --mount "$work/weft" >"$work/up.log" 2>&1 &
  fi
  pids+=($!)
fi
if [[ " $targets " == *" loop "* ]]; then
  "$weft" bench loopback "$work/loopsrc" "$work/loop" >"$work/loop.log" 2>&1 &
  pids+=($!)
fi
for _ in $(seq 1 180); do
  ok=true
  [[ " $targets " == *" weft "* ]] && ! grep -q '^ready:' "$work/up.log" && ok=false
  [[ " $targets " == *" loop "* ]] && ! grep -q '^mounted:' "$work/loop.log" && ok=false
  $ok && break
  sleep 1
done
if [[ " $targets " == *" weft "* && -n "${PPROF:-}" ]]; then
  admin=$(sed -n 's/^ready: admin=https\?:\/\/\([^ ]*\).*/\1/p' "$work/up.log")
  "$weft" --admin "$admin" --pki "$work/cluster/pki" mount --metrics "$PPROF" --pprof "$work/weft" >"$work/mount.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 60); do mountpoint -q "$work/weft" && break; sleep 1; done
fi

dropcaches() { sync; echo 3 >/proc/sys/vm/drop_caches; }
# fiorun DIR NAME ARGS… → prints "MB/s IOPS"
fiorun() {
  local dir=$1 name=$2; shift 2
  fio --name="$name" --directory="$dir" --ioengine=psync --group_reporting --output-format=json \
    --output="$work/$name.$1.json" "$@" >/dev/null
  python3 - "$work/$name.$1.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
op = "write" if j["write"]["io_bytes"] > 0 else "read"
print("%.0f %.0f" % (j[op]["bw_bytes"] / 1e6, j[op]["iops"]))
PY
}

declare -A res
for target in $targets; do
  dir="$work/$target"
  for jobs in $jobsl; do
    name=sw$jobs
    fiorun "$dir" "$name" --rw=write --bs=1m --size="$size" --numjobs="$jobs" --end_fsync=1 >/dev/null
    dropcaches
    read -r res[$target,seq,$jobs] _ < <(fiorun "$dir" "$name" --rw=read --bs=1m --size="$size" --numjobs="$jobs")
    dropcaches
    read -r _ res[$target,rand,$jobs] < <(fiorun "$dir" "$name" --rw=randread --bs=4k --size="$size" --numjobs="$jobs" \
      --direct=0 --time_based --runtime="$runtime")
    echo "[$(date +%T)] $target $jobs job(s): seq ${res[$target,seq,$jobs]} MB/s, rand ${res[$target,rand,$jobs]} IOPS" >&2
    rm -f "$dir"/sw*
    dropcaches
  done
done

echo "| test | jobs | $(echo "$targets" | sed 's/ / | /g') | weft ÷ loop |"
echo "|---|---|$(for _ in $targets; do printf -- '---|'; done)---|"
for t in seq rand; do
  for jobs in $jobsl; do
    row="| $t read $( [ $t = seq ] && echo MB/s || echo IOPS ) | $jobs |"
    for target in $targets; do row="$row ${res[$target,$t,$jobs]:-—} |"; done
    w=${res[weft,$t,$jobs]:-0} l=${res[loop,$t,$jobs]:-0}
    ratio=—; [ "$l" != 0 ] && [ "$w" != 0 ] && ratio=$(python3 -c "print('%.2f' % ($w/$l))")
    echo "$row $ratio |"
  done
done
