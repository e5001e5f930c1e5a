#!/usr/bin/env bash
# Two weft variants measured on the same machine in the same run: two
# binaries (say the previous commit's and this one's), or one binary with
# two sets of `weft local up` flags (say TLS, the default, and --insecure).
# Each run is a fresh 3-node x 4-drive ec:4+2 local cluster and its mount;
# the variants alternate ROUNDS times, so that both see the machine as it
# is. A run measures, through the mount: one-thread metadata rates (`weft
# bench meta`: create, stat, remove of FILES empty files in one directory,
# REPS times) and a sequential write then read of SIZE with fio (1 job,
# 1 MiB blocks, end_fsync, page cache dropped before the read). Prints
# every run and the means with ratios (B ÷ A). Needs root (FUSE mounts,
# drop_caches) and fio.
#   usage: scripts/bench-ab.sh BIN_A BIN_B
#   MOUNT_ARGS  flags of both variants' mounts (say --no-local-io: every
#              unit through the block service, as from another machine);
#              the mount is then a `weft mount` the script starts itself
#   ARGS_A, ARGS_B  extra `weft local up` flags of each variant
#                   (ARGS_A=--insecure scripts/bench-ab.sh ./weft ./weft:
#                   the cost of TLS is the B ÷ A column)
#   BENCH_DIR  work directory (default: new dir under /var/tmp)
#   FILES      files per metadata run (default 10000)
#   SIZE       bytes of the sequential write and read (default 1g)
#   ROUNDS     rounds (default 2)
#   REPS       metadata runs per cluster start (default 3)
#   TESTS      from: meta seq (default: both)
set -euo pipefail
if [ $# -ne 2 ] || [ ! -x "$1" ] || [ ! -x "$2" ]; then
  echo "usage: $0 BIN_A BIN_B   (two executable weft binaries, each built with go build -o FILE ./cmd/weft at the commit to compare; the same one twice with ARGS_A/ARGS_B to compare flags)" >&2
  exit 2
fi
work=${BENCH_DIR:-$(mktemp -d /var/tmp/weft-ab.XXXXXX)}
files=${FILES:-10000}
size=${SIZE:-1g}
rounds=${ROUNDS:-2}
reps=${REPS:-3}
tests=" ${TESTS:-meta seq} "
for t in $tests; do
  case $t in meta|seq) ;; *) echo "bench-ab: TESTS: unknown test '$t'; choose from meta seq" >&2; exit 2 ;; esac
done
if [[ $tests == *" seq "* ]] && ! command -v fio >/dev/null; then
  echo "bench-ab: the seq test needs fio (apt-get install fio), or run with TESTS=meta" >&2
  exit 2
fi
mkdir -p "$work"

# fio DIR NAME ARGS… → MB/s
fiorun() {
  local dir=$1 name=$2; shift 2
  fio --name="$name" --directory="$dir" --ioengine=psync --output-format=json "$@" >"$work/fio.json"
  python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
op = "write" if j["write"]["io_bytes"] > 0 else "read"
print(round(j[op]["bw_bytes"] / 1e6))' "$work/fio.json"
}

# runs BIN NAME ARGS: a fresh cluster, its runs appended to $work/runs
# as "NAME test value".
runs() {
  local bin=$1 name=$2 args=$3 dir="$work/$2" up
  rm -rf "$dir"
  mkdir -p "$dir"
  # shellcheck disable=SC2086 # ARGS_* are flags, split on purpose
  local mountflag=(--mount "$dir/mnt") mnt=
  [ -n "${MOUNT_ARGS:-}" ] && mountflag=()
  "$bin" local up --dir "$dir/cluster" "${mountflag[@]}" $args >"$dir/up.log" 2>&1 &
  up=$!
  for _ in $(seq 1 120); do grep -q '^ready:' "$dir/up.log" && break; sleep 1; done
  grep -q '^ready:' "$dir/up.log" || { cat "$dir/up.log"; kill $up; exit 1; }
  if [ -n "${MOUNT_ARGS:-}" ]; then
    local admin creds=(--insecure)
    admin=$(sed -n 's/^ready: admin=https\{0,1\}:\/\/\([^ ]*\).*/\1/p' "$dir/up.log")
    [ -d "$dir/cluster/pki" ] && creds=(--pki "$dir/cluster/pki" --as mount)
    mkdir -p "$dir/mnt"
    # shellcheck disable=SC2086 # MOUNT_ARGS are flags, split on purpose
    "$bin" --admin "$admin" mount "${creds[@]}" $MOUNT_ARGS "$dir/mnt" >"$dir/mount.log" 2>&1 &
    mnt=$!
    for _ in $(seq 1 60); do mountpoint -q "$dir/mnt" && break; sleep 1; done
    mountpoint -q "$dir/mnt" || { cat "$dir/mount.log"; kill $up $mnt; exit 1; }
  fi
  sleep 5 # let the new cluster's own start-up work finish
  if [[ $tests == *" meta "* ]]; then
    for _ in $(seq 1 "$reps"); do
      "$bin" bench meta --json --files "$files" "$dir/mnt" | python3 -c '
import json, sys
j = json.load(sys.stdin)
for k in ("creates_per_s", "stats_per_s", "removes_per_s"):
    print(sys.argv[1], k.replace("_per_s", "/s"), round(j[k]))' "$name" >>"$work/runs"
    done
  fi
  if [[ $tests == *" seq "* ]]; then
    echo "$name write-MB/s $(fiorun "$dir/mnt" seq --rw=write --bs=1m --size="$size" --end_fsync=1)" >>"$work/runs"
    sync; echo 3 >/proc/sys/vm/drop_caches
    echo "$name read-MB/s $(fiorun "$dir/mnt" seq --rw=read --bs=1m --size="$size")" >>"$work/runs"
  fi
  if [ -n "$mnt" ]; then
    kill -TERM "$mnt"
    wait "$mnt" 2>/dev/null || true
  fi
  kill -TERM $up
  wait $up 2>/dev/null || true
}

: >"$work/runs"
for _ in $(seq 1 "$rounds"); do
  runs "$1" A "${ARGS_A:-}"
  runs "$2" B "${ARGS_B:-}"
done
echo "A: $1 ${ARGS_A:-}"
echo "B: $2 ${ARGS_B:-}"
[ -n "${MOUNT_ARGS:-}" ] && echo "mounts: weft mount $MOUNT_ARGS"
echo
python3 - "$work/runs" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1])]
print("| | A runs | A mean | B runs | B mean | B ÷ A |")
print("|---|---|---|---|---|---|")
for op in dict.fromkeys(r[1] for r in rows):
    a = [int(r[2]) for r in rows if r[0] == "A" and r[1] == op]
    b = [int(r[2]) for r in rows if r[0] == "B" and r[1] == op]
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    print("| %s | %s | %.0f | %s | %.0f | %.2f |" % (op, ", ".join(map(str, a)), ma, ", ".join(map(str, b)), mb, mb / ma))
PY
