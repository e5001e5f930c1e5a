#!/usr/bin/env bash
# fio through a weft mount (3 nodes x 4 drives, ec:4+2) against, in the same
# run, fio on a raw directory of the same file system and on a go-fuse
# loopback mount of it with kernel passthrough refused (FUSE's own ceiling);
# then one-thread metadata rates on the weft mount and the raw directory.
# Prints markdown tables with ratios. Needs root (drop_caches, mounts) and fio.
#   BENCH_DIR  work directory (default: new dir under /var/tmp)
#   SIZE       bytes of the sequential tests per job count (default 2g)
#   RUNTIME    seconds of each random test (default 15)
#   FILES      files of the metadata test (default 10000)
#   TESTS      which tests to run, from: seqwrite seqread randread randwrite
#              meta (default: all). The fio tests read the files seqwrite
#              leaves, so any fio test also runs (and reports) seqwrite.
#   WEFT_BIN   a weft binary to measure instead of building this checkout
#   SETTLE     seconds to wait after a round's files are deleted, once weft
#              has freed their blocks, before the next round (default 35;
#              see "Clean slate" in docs/benchmarks.md)
set -euo pipefail
cd "$(dirname "$0")/.."
work=${BENCH_DIR:-$(mktemp -d /var/tmp/weft-fuse-bench.XXXXXX)}
size=${SIZE:-2g}
runtime=${RUNTIME:-15}
files=${FILES:-10000}
settle=${SETTLE:-35}
tests=" ${TESTS:-seqwrite seqread randread randwrite meta} "
fio_tests=false
for t in $tests; do
  case $t in
    seqwrite|seqread|randread|randwrite) fio_tests=true ;;
    meta) ;;
    *) echo "bench-fuse: TESTS: unknown test '$t'; choose from seqwrite seqread randread randwrite meta" >&2; exit 2 ;;
  esac
done
$fio_tests && tests="$tests seqwrite "
. scripts/lib/weft-bin.sh
weft=$(weft_bin bench-fuse "$work") || exit $?

"$weft" local up --dir "$work/cluster" --mount "$work/weft" >"$work/up.log" 2>&1 &
up=$!
mkdir -p "$work/raw" "$work/loopsrc" "$work/loop"
"$weft" bench loopback "$work/loopsrc" "$work/loop" >"$work/loop.log" 2>&1 &
loop=$!
cleanup() { kill -TERM $up $loop 2>/dev/null || true; wait $up $loop 2>/dev/null || true; }
trap cleanup EXIT
for i in $(seq 1 120); do grep -q '^ready:' "$work/up.log" && grep -q '^mounted:' "$work/loop.log" && break; sleep 1; done
grep -q '^ready:' "$work/up.log" || { cat "$work/up.log"; exit 1; }

dropcaches() { sync; echo 3 >/proc/sys/vm/drop_caches; }
admin=$(sed -n 's/^ready: admin=http:\/\/\([^ ]*\).*/\1/p' "$work/up.log")
# cleanslate waits until weft has freed the blocks of deleted files (its
# deletes are queued and done in the background; a raw directory's and the
# loopback's are done by rm itself), then SETTLE seconds.
cleanslate() {
  local used
  for _ in $(seq 1 300); do
    used=$("$weft" --admin "$admin" status --json | python3 -c 'import json,sys;print(json.load(sys.stdin)["used_bytes"])')
    [ "$used" -eq 0 ] && break
    sleep 1
  done
  [ "$used" -eq 0 ] || echo "bench-fuse: weft still holds $used bytes of deleted files after 300 s" >&2
  sleep "$settle"
}
# fio TARGET NAME ARGS… → prints "MB/s IOPS"
fiorun() {
  local dir=$1 name=$2; shift 2
  fio --name="$name" --directory="$dir" --ioengine=psync --group_reporting --output-format=json "$@" >"$work/$name.json"
  python3 - "$work/$name.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
op = "write" if j["write"]["io_bytes"] > 0 else "read"
mbs = j[op]["bw_bytes"] / 1e6
print("%s %.0f" % ("%.0f" % mbs if mbs >= 10 else "%.2f" % mbs, j[op]["iops"]))
PY
}

declare -A res
$fio_tests && for target in raw loop weft; do
  dir="$work/$target"
  for jobs in 1 4; do
    per=$(python3 -c "import re;s='$size';m=re.match(r'(\d+)([kmg]?)',s.lower());n=int(m[1])*{'':1,'k':1<<10,'m':1<<20,'g':1<<30}[m[2]];print(n//$jobs)")
    # The sequential write leaves the files the other tests read.
    res[$target,seqwrite,$jobs]=$(fiorun "$dir" "sw-$target-$jobs" --rw=write --bs=1m --size="$per" --numjobs=$jobs --end_fsync=1)
    dropcaches
    [[ $tests == *" seqread "* ]] && res[$target,seqread,$jobs]=$(fiorun "$dir" "sw-$target-$jobs" --rw=read --bs=1m --size="$per" --numjobs=$jobs)
    dropcaches
    [[ $tests == *" randread "* ]] && res[$target,randread,$jobs]=$(fiorun "$dir" "sw-$target-$jobs" --rw=randread --bs=4k --size="$per" --numjobs=$jobs --time_based --runtime="$runtime")
    [[ $tests == *" randwrite "* ]] && res[$target,randwrite,$jobs]=$(fiorun "$dir" "sw-$target-$jobs" --rw=randwrite --bs=4k --size="$per" --numjobs=$jobs --time_based --runtime="$runtime" --end_fsync=1)
    rm -f "$dir"/sw-*
    cleanslate
    dropcaches
  done
done

$fio_tests && echo "| test | jobs | raw dir MB/s | loopback MB/s | weft MB/s | weft ÷ loopback | weft ÷ raw | weft IOPS |"
$fio_tests && echo "|---|---|---|---|---|---|---|---|"
for t in seqwrite seqread randread randwrite; do
  [[ $tests == *" $t "* ]] || continue
  for jobs in 1 4; do
    read -r r _ <<<"${res[raw,$t,$jobs]}"; read -r l _ <<<"${res[loop,$t,$jobs]}"; read -r w wi <<<"${res[weft,$t,$jobs]}"
    printf "| %s | %s | %s | %s | %s | %.3f | %.3f | %s |\n" "$t" "$jobs" "$r" "$l" "$w" "$(echo "$w/$l" | bc -l)" "$(echo "$w/$r" | bc -l)" "$wi"
  done
done

[[ $tests == *" meta "* ]] || exit 0
echo
echo "| metadata, one thread, $files files | raw dir ops/s | weft ops/s | weft ÷ raw |"
echo "|---|---|---|---|"
"$weft" bench meta --json --files "$files" "$work/raw" >"$work/meta-raw.json"
"$weft" bench meta --json --files "$files" "$work/weft" >"$work/meta-weft.json"
python3 - "$work/meta-raw.json" "$work/meta-weft.json" <<'PY'
import json, sys
r, w = (json.load(open(p)) for p in sys.argv[1:3])
for op, k in (("create", "creates_per_s"), ("stat", "stats_per_s"), ("remove", "removes_per_s")):
    print("| %s | %.0f | %.0f | %.2f |" % (op, r[k], w[k], w[k] / r[k]))
PY
