#!/usr/bin/env bash
# Small random writes through a weft mount, against a go-fuse loopback of
# a local directory in the same run (weft's own FUSE ceiling).
#
# For each system (weft: a fresh `weft local up`, 3 nodes x 4 drives,
# ec:4+2; loopback: `weft bench loopback` of a directory on the same disk)
# and each job count of JOBS: fio writes SIZE per job sequentially
# (end_fsync), caches are dropped, then fio writes 4 KiB at random
# offsets of those files for RUNTIME seconds with end_fsync=1 (the fsync's
# time counts), as the side-by-side benchmark does
# (../shared/bench/bench-side-by-side.sh). Reported per test: IOPS, weft
# over the loopback, and the CPU seconds the weft mount process spent per
# 1,000 random writes (from /proc: the client's cost of a write, buffering
# and write-out together, whatever else loads the machine). fio's JSON
# output and the systems' logs stay in the work directory it prints.
# Needs root (mount, drop_caches) and fio.
#   SIZE     bytes per fio job (default 1g)
#   RUNTIME  seconds of each random-write test (default 20)
#   JOBS     job counts (default "1 4")
#   SYSTEMS  "weft loopback" (default) or one of them
#   WEFT_BIN a weft binary (default: built from this tree)
set -euo pipefail
cd "$(dirname "$0")/.."
size=${SIZE:-1g}
runtime=${RUNTIME:-20}
jobs_list=${JOBS:-1 4}
systems=${SYSTEMS:-weft loopback}
work=$(mktemp -d /var/tmp/weft-randwrite.XXXXXX)
if [ -z "${WEFT_BIN:-}" ]; then
  go build -o "$work/weft" ./cmd/weft
  WEFT_BIN=$work/weft
fi
weft=$WEFT_BIN
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
  sleep 3
  for m in "$work"/*.mnt; do mountpoint -q "$m" 2>/dev/null && fusermount3 -u "$m" 2>/dev/null || true; done
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  rm -rf "$work"/*.data "$work"/*.mnt "$work/weft"
  echo "bench-randwrite: fio's JSON and the logs are in $work" >&2
}
trap cleanup EXIT
wait_for() { # SECONDS CMD...: poll CMD every half second
  local n=$(($1 * 2)); shift
  for ((i = 0; i < n; i++)); do "$@" && return 0; sleep 0.5; done
  return 1
}
cpu_of() { # PID -> CPU seconds (user + system) of the process so far
  awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$1/stat"
}
mount_pid() { # MNT -> pid of the weft mount process serving it
  pgrep -f -- " mount .*$1\$" | head -1
}
declare -A iops cpu
for sys in $systems; do
  mnt=$work/$sys.mnt
  mkdir -p "$mnt" "$work/$sys.data"
  case $sys in
    weft)
      "$weft" local up --dir "$work/$sys.data/cluster" --mount "$mnt" >"$work/$sys.log" 2>&1 &
      pids+=($!)
      wait_for 180 grep -q '^ready:' "$work/$sys.log" || { tail -30 "$work/$sys.log" >&2; exit 1; }
      ;;
    loopback)
      "$weft" bench loopback "$work/$sys.data" "$mnt" >"$work/$sys.log" 2>&1 &
      pids+=($!)
      wait_for 60 grep -q '^mounted:' "$work/$sys.log" || { cat "$work/$sys.log" >&2; exit 1; }
      ;;
    *) echo "bench-randwrite: unknown system $sys (weft, loopback)" >&2; exit 2 ;;
  esac
  for j in $jobs_list; do
    dir=$mnt/fio$j
    mkdir -p "$dir"
    fio --name=rw --directory="$dir" --ioengine=psync --rw=write --bs=1m --size="$size" --numjobs="$j" \
        --end_fsync=1 --output-format=json >/dev/null
    sync; echo 3 >/proc/sys/vm/drop_caches
    mp=""
    [ "$sys" = weft ] && mp=$(mount_pid "$mnt")
    c0=0; [ -n "$mp" ] && c0=$(cpu_of "$mp")
    fio --name=rw --directory="$dir" --ioengine=psync --rw=randwrite --bs=4k --size="$size" --numjobs="$j" \
        --direct=0 --time_based --runtime="$runtime" --end_fsync=1 --group_reporting --output-format=json \
        >"$work/$sys.$j.json"
    c1=0; [ -n "$mp" ] && c1=$(cpu_of "$mp")
    read -r v n < <(python3 -c 'import json,sys; w=json.load(open(sys.argv[1]))["jobs"][0]["write"]; print("%.0f %d" % (w["iops"], w["total_ios"]))' "$work/$sys.$j.json")
    iops[$sys.$j]=$v
    [ -n "$mp" ] && cpu[$sys.$j]=$(python3 -c "print('%.3f' % (($c1 - $c0) * 1000 / max($n, 1)))")
    echo "[$(date +%T)] $sys, $j job(s): $v IOPS${mp:+, mount CPU ${cpu[$sys.$j]} s per 1,000 writes}" >&2
    rm -rf "$dir"
  done
  kill -INT "${pids[-1]}" 2>/dev/null || true
  wait_for 120 bash -c "! mountpoint -q '$mnt'" || fusermount3 -u "$mnt" || true
  wait "${pids[-1]}" 2>/dev/null || true
done
echo "| test | $(echo "$systems" | sed 's/ / | /g') | weft ÷ loopback | weft mount CPU s / 1,000 writes |"
echo "|---|$(for _ in $systems; do printf -- '---|'; done)---|---|"
for j in $jobs_list; do
  row="| 4 KiB rand write $j job(s), IOPS |"
  for sys in $systems; do row+=" ${iops[$sys.$j]:-—} |"; done
  ratio=—
  if [ -n "${iops[weft.$j]:-}" ] && [ -n "${iops[loopback.$j]:-}" ]; then
    ratio=$(python3 -c "print('%.2f' % (${iops[weft.$j]} / max(${iops[loopback.$j]}, 1)))")
  fi
  echo "$row $ratio | ${cpu[weft.$j]:-—} |"
done
