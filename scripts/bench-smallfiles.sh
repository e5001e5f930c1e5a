#!/usr/bin/env bash
# The small-file rows of ../shared/bench/bench-side-by-side.sh, weft only,
# for one or more builds in one run: for each binary, a fresh `weft local
# up` (3 nodes x 4 drives, ec:4+2), `tar -xf` of TAR into its mount then
# `sync -f` and an fsync of the directory (files written per second), a wait for the jobs the writes
# started (a multiscan after the first data otherwise runs during the
# reads), then ROUNDS times a cache drop and `find | xargs cat` (files read
# per second; the first round after the untar is the side-by-side's). The
# builds take turns REPEAT times, so that the machine's swings fall on all
# of them. Prints a markdown table; its "CPU ms/file" is the user and
# system time of the cluster's processes (nodes with their etcd members,
# and the mount) during the untar, per file. Needs root (drop_caches,
# mounts).
#   TAR        the archive to extract (default: /usr/share/doc, tarred once
#              into BENCH_DIR)
#   BINS       weft binaries to compare, space-separated (default: one built
#              from this checkout; WEFT_BIN names a single one too)
#   ROUNDS     read rounds per run (default 3)
#   REPEAT     runs per binary (default 1)
#   BENCH_DIR  work directory (default: new dir under /var/tmp)
#   SYSCALLS   1: after each run's rounds, untar once more and read that
#              copy under `strace -T`, and print each system call's
#              latency on the mount (scripts/lib/syscall-latency.py):
#              where a file's time goes, call by call
set -euo pipefail
cd "$(dirname "$0")/.."
work=${BENCH_DIR:-$(mktemp -d /var/tmp/weft-smallfiles.XXXXXX)}
rounds=${ROUNDS:-3}
repeat=${REPEAT:-1}
mkdir -p "$work"
if [ -z "${BINS:-}" ]; then
  . scripts/lib/weft-bin.sh
  BINS=$(weft_bin bench-smallfiles "$work") || exit $?
fi
for b in $BINS; do
  [ -x "$b" ] || { echo "bench-smallfiles: $b is not an executable weft binary (BINS)" >&2; exit 2; }
done
tar=${TAR:-}
if [ -z "$tar" ]; then
  tar=$work/doc.tar
  [ -s "$tar" ] || tar -C /usr/share -cf "$tar" doc
fi
[ -r "$tar" ] || { echo "bench-smallfiles: cannot read TAR=$tar" >&2; exit 2; }
syscalls=${SYSCALLS:-0}
if [ "$syscalls" = 1 ] && ! command -v strace >/dev/null; then
  echo "bench-smallfiles: SYSCALLS=1 needs strace (apt-get install strace)" >&2
  exit 2
fi

# fsync_dir DIR: fsync(2) of a directory (weft: waits for the namespace
# changes and files its mount has not committed yet).
fsync_dir() { python3 -c 'import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd)' "$1"; }

# A run's cluster is moved aside, and all are deleted at the end: on ext4
# without a journal (this machine's), the inodes of files deleted in the
# last minutes are passed over one by one when a new one is allocated,
# so a run right after a deletion of thousands of block files spent up to
# a third of its mount's CPU creating the staged files (docs/benchmarks.md).
up_pid=
runs=0
stop() {
  if [ -n "$up_pid" ]; then
    kill -INT "$up_pid" 2>/dev/null || true
    wait "$up_pid" 2>/dev/null || true
  fi
  umount -l "$work/mnt" 2>/dev/null || true
  if [ -d "$work/cluster" ]; then
    runs=$((runs + 1))
    mv "$work/cluster" "$work/done.$runs"
  fi
}
cleanup() {
  stop
  rm -rf "$work"/done.*
}
trap cleanup EXIT

rate() { python3 -c "print(f'{$1/($3-$2):.1f}')"; }
# cpu_ticks: user + system clock ticks of the processes whose command line
# names this run's cluster directory (its nodes and its mount).
cpu_ticks() {
  local p t=0 st rest
  for p in /proc/[0-9]*; do
    grep -qsF "$work/cluster" "$p/cmdline" 2>/dev/null || continue
    st=$(cat "$p/stat" 2>/dev/null) || continue
    rest=${st##*) }
    set -- $rest
    t=$((t + ${12} + ${13}))
  done
  echo "$t"
}

results=()
stop # a cluster left by an earlier run in BENCH_DIR goes aside too
for r in $(seq 1 "$repeat"); do
  for b in $BINS; do
    mkdir -p "$work/mnt"
    "$b" local up --dir "$work/cluster" --mount "$work/mnt" >"$work/up.log" 2>&1 &
    up_pid=$!
    for _ in $(seq 1 180); do grep -q '^ready:' "$work/up.log" && break; sleep 1; done
    grep -q '^ready:' "$work/up.log" || { tail -20 "$work/up.log" >&2; exit 1; }
    weft=("$b" --admin "$(cat "$work/cluster/admin.addr")" --pki "$work/cluster/pki")
    mkdir "$work/mnt/x"
    c0=$(cpu_ticks)
    # sync -f does not reach a FUSE file system (the kernel sends FUSE
    # SYNCFS to virtiofs only); the fsync of the directory waits for the
    # mount's write-back, so the time counts every file committed.
    s=$(date +%s.%N); tar -C "$work/mnt/x" -xf "$tar"; sync -f "$work/mnt/x"; fsync_dir "$work/mnt/x"; e=$(date +%s.%N)
    c1=$(cpu_ticks)
    find "$work/mnt/x" -type f >"$work/files"
    n=$(wc -l <"$work/files")
    row="| $(basename "$b") | $r | $n | $(rate "$n" "$s" "$e") | $(python3 -c "print(f'{($c1-$c0)*1000/$(getconf CLK_TCK)/$n:.2f}')")"
    for _ in $(seq 1 120); do
      "${weft[@]}" job list 2>/dev/null | grep -qw 'running\|queued' || break
      sleep 5
    done
    for _ in $(seq 1 "$rounds"); do
      sync; echo 3 >/proc/sys/vm/drop_caches
      s=$(date +%s.%N); xargs -d '\n' cat <"$work/files" >/dev/null; e=$(date +%s.%N)
      row="$row | $(rate "$n" "$s" "$e")"
    done
    results+=("$row |")
    if [ "$syscalls" = 1 ]; then
      mkdir "$work/mnt/y"
      strace -T -o "$work/tar.strace" tar -C "$work/mnt/y" -xf "$tar"
      sync -f "$work/mnt/y"
      find "$work/mnt/y" -type f >"$work/files.y"
      sync; echo 3 >/proc/sys/vm/drop_caches
      strace -f -T -o "$work/cat.strace" xargs -d '\n' cat <"$work/files.y" >/dev/null
      {
        echo "### $(basename "$b"), run $r: tar -xf under strace -T, calls on the mount"
        echo
        scripts/lib/syscall-latency.py "$work/tar.strace" "$work/mnt"
        echo
        echo "### $(basename "$b"), run $r: xargs cat after a cache drop, under strace -f -T"
        echo
        scripts/lib/syscall-latency.py "$work/cat.strace" "$work/mnt"
        echo
      } >>"$work/syscalls.md"
    fi
    stop
    up_pid=
    echo "${results[-1]}" >&2
  done
done
printf '| build | run | files | written/s | CPU ms/file |'
for i in $(seq 1 "$rounds"); do printf ' read/s round %d |' "$i"; done
printf '\n|---|---|---|---|---|'
for _ in $(seq 1 "$rounds"); do printf -- '---|'; done
printf '\n'
printf '%s\n' "${results[@]}"
if [ "$syscalls" = 1 ]; then
  echo
  cat "$work/syscalls.md"
fi
