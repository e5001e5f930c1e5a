#!/usr/bin/env bash
# What sparse files store on weft (3 nodes x 4 drives, ec:4+2, weft local up)
# against ext4 (the directory BENCH_DIR is on), for two weft binaries in one
# run, and their sequential write throughput (fio) as a ratio:
#   stress   3 MiB written every 100 MiB, stripe-aligned (COUNT regions)
#   offset   the same 1.5 MiB past each 100 MiB mark (data across 2 stripes)
#   posix    posix_fallocate(3) of SIZE_PF bytes (fallocate --posix: glibc
#            writes a zero byte per 4 KiB block where fallocate(2) fails)
#   falloc   fallocate(2) mode 0 of SIZE_PF bytes (fallocate -l)
# For each it prints apparent bytes, st_blocks x 512 (what weft stores,
# parity included) and the seconds it took, in a markdown table. Needs root
# (FUSE), fio.
#   BENCH_DIR  work directory (default: new dir under /var/tmp)
#   BASE_BIN   the weft binary to compare with (default: built from BASE_REV)
#   BASE_REV   git revision BASE_BIN is built from (default: main)
#   COUNT      regions of the stress patterns (default 37: 3.7 GB apparent)
#   SIZE_PF    bytes of the posix/falloc files (default 256m)
#   SEQ        bytes of the fio sequential write (default 1g; 0: skip it)
#   ROUNDS     fio rounds per binary, which goes first alternating (default 2)
set -euo pipefail
cd "$(dirname "$0")/.."
work=${BENCH_DIR:-$(mktemp -d /var/tmp/weft-sparse-bench.XXXXXX)}
count=${COUNT:-37}
size_pf=${SIZE_PF:-256m}
seq=${SEQ:-1g}
rounds=${ROUNDS:-2}
base_rev=${BASE_REV:-main}
mkdir -p "$work"
if [ -n "${BASE_BIN:-}" ]; then
  [ -x "$BASE_BIN" ] || { echo "bench-sparse: BASE_BIN=$BASE_BIN is not an executable file" >&2; exit 2; }
  cp "$BASE_BIN" "$work/weft-base"
else
  rm -rf "$work/base-src" && mkdir -p "$work/base-src"
  git archive "$base_rev" | tar -x -C "$work/base-src"
  (cd "$work/base-src" && go build -o "$work/weft-base" ./cmd/weft)
fi
go build -o "$work/weft-new" ./cmd/weft

# pattern DIR NAME: writes one pattern's file in DIR.
pattern() {
  local dir=$1 name=$2 f=$1/$2 i
  case $name in
    stress|offset)
      local skew=0
      [ "$name" = offset ] && skew=3 # in 512 KiB blocks: 1.5 MiB
      : >"$f"
      for i in $(seq 0 $((count - 1))); do
        dd if=/dev/urandom of="$f" bs=512K count=6 seek=$((i * 200 + skew)) conv=notrunc status=none
      done ;;
    posix) fallocate --posix -l "$size_pf" "$f" ;;
    falloc) fallocate -l "$size_pf" "$f" ;;
  esac
  sync -f "$f"
}

# measure DIR NAME → "apparent stored"
measure() { stat -c '%s %b' "$1/$2" | awk '{print $1, $2 * 512}'; }

declare -A res
# ext4 (the work directory's file system)
mkdir -p "$work/ext4"
for p in stress offset posix falloc; do
  pattern "$work/ext4" "$p"
  res[ext4,$p]=$(measure "$work/ext4" "$p")
  rm -f "$work/ext4/$p"
done

fiorate() {
  fio --name=seq --directory="$1" --rw=write --bs=1M --size="$seq" --ioengine=psync --end_fsync=1 --output-format=json >"$work/fio.json"
  python3 -c 'import json,sys;print("%.0f" % (json.load(open(sys.argv[1]))["jobs"][0]["write"]["bw_bytes"]/1e6))' "$work/fio.json"
}

cleanup() {
  for v in base new; do [ -f "$work/up-$v.pid" ] && kill -TERM "$(cat "$work/up-$v.pid")" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT
for v in base new; do
  bin="$work/weft-$v"
  rm -rf "$work/cluster-$v"; mkdir -p "$work/mnt-$v"
  "$bin" local up --dir "$work/cluster-$v" --mount "$work/mnt-$v" >"$work/up-$v.log" 2>&1 &
  echo $! >"$work/up-$v.pid"
  for _ in $(seq 1 120); do grep -q '^ready:' "$work/up-$v.log" && break; sleep 1; done
  grep -q '^ready:' "$work/up-$v.log" || { cat "$work/up-$v.log"; exit 1; }
  for p in stress offset posix falloc; do
    start=$(date +%s%N)
    pattern "$work/mnt-$v" "$p" || echo "bench-sparse: $v $p failed" >&2
    secs=$(( ($(date +%s%N) - start) / 1000000 ))e-3
    res[$v,$p]="$(measure "$work/mnt-$v" "$p") $secs"
    rm -f "$work/mnt-$v/$p"
  done
done

echo "| pattern | apparent | ext4 stored | weft before stored | weft after stored | after ÷ ext4 | before ÷ after | before s | after s |"
echo "|---|---|---|---|---|---|---|---|---|"
for p in stress offset posix falloc; do
  read -r app e4 <<<"${res[ext4,$p]}"
  read -r _ b bs <<<"${res[base,$p]}"
  read -r _ n ns <<<"${res[new,$p]}"
  python3 - "$p" "$app" "$e4" "$b" "$n" "$bs" "$ns" <<'PY'
import sys
p, app, e4, b, n, bs, ns = sys.argv[1], *map(float, sys.argv[2:])
mib = lambda x: "%.1f MiB" % (x / 2**20)
r = lambda a, c: "%.2f" % (a / c) if c else "∞" if a else "—"
print("| %s | %s | %s | %s | %s | %s | %s | %.1f | %.1f |" % (p, mib(app), mib(e4), mib(b), mib(n), r(n, e4), r(b, n), bs, ns))
PY
done

if [ "$seq" != 0 ]; then
  echo
  echo "| fio seq write $seq, 1 job, MB/s | round | before | after | after ÷ before |"
  echo "|---|---|---|---|---|"
  # odd rounds measure the base binary first, even rounds the new one
  for r in $(seq 1 "$rounds"); do
    if [ $((r % 2)) = 1 ]; then
      b=$(fiorate "$work/mnt-base"); rm -f "$work"/mnt-base/seq*
      n=$(fiorate "$work/mnt-new"); rm -f "$work"/mnt-new/seq*
    else
      n=$(fiorate "$work/mnt-new"); rm -f "$work"/mnt-new/seq*
      b=$(fiorate "$work/mnt-base"); rm -f "$work"/mnt-base/seq*
    fi
    echo "| | $r | $b | $n | $(python3 -c "print('%.2f' % ($n / $b))") |"
  done
fi
