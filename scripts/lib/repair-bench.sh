# Shared by the scripts that measure a repair on a fresh local cluster
# (bench-qos.sh, bench-qos-client.sh): sourced, after setting weft (the
# binary) and work (the work directory, removed at exit). Each function
# names its arguments; the cluster's supervisor pid is in $up, a mount's
# own in $mnt, the cluster's directory in $dir.

up=""
mnt=""

# bench_down stops the mount and the cluster, if running.
bench_down() {
  if [ -n "$mnt" ]; then kill -TERM "$mnt" 2>/dev/null || true; wait "$mnt" 2>/dev/null || true; mnt=""; fi
  if [ -n "$up" ]; then kill -TERM "$up" 2>/dev/null || true; wait "$up" 2>/dev/null || true; up=""; fi
}
bench_cleanup() { bench_down; rm -rf "$work"; }
trap bench_cleanup EXIT

# bench_up DIR MOUNT: a fresh insecure 3-node x 4-drive cluster in
# DIR/cluster (ec:4+2), lease 3 s, repair grace 1 h, with a mount at
# DIR/mnt: MOUNT "local" is weft local up's own (it reads the drives of
# this machine directly), "remote" a `weft mount --no-local-io` that
# reads and writes every unit through the block services, as a client
# on a machine of its own does (what QoS and the client latency see).
bench_up() {
  dir=$1
  mkdir -p "$dir/mnt"
  local m="$dir/mnt"
  [ "$2" = remote ] && m=""
  "$weft" local up --insecure --dir "$dir/cluster" --mount "$m" --lease-ttl 3s --repair-grace 1h >"$dir/up.log" 2>&1 &
  up=$!
  for _ in $(seq 1 120); do grep -q '^ready:' "$dir/up.log" && break; sleep 1; done
  grep -q '^ready:' "$dir/up.log" || { cat "$dir/up.log" >&2; exit 1; }
  WEFT_ADMIN=$(paste -sd, "$dir/cluster/admin.addrs")
  export WEFT_ADMIN
  if [ "$2" = remote ]; then
    "$weft" --insecure mount --no-local-io "$dir/mnt" >"$dir/mount.log" 2>&1 &
    mnt=$!
    for _ in $(seq 1 60); do grep -q " $dir/mnt fuse" /proc/mounts && break; sleep 0.5; done
    grep -q " $dir/mnt fuse" /proc/mounts || { cat "$dir/mount.log" >&2; exit 1; }
  fi
}

# bench_write BYTES: fio writes BYTES through the mount (2 jobs, 8 files
# each, 1 MiB), then the page cache is dropped.
bench_write() {
  fio --name=data --directory="$dir/mnt" --rw=write --bs=1m --size="$1" --numjobs=2 --nrfiles=8 --end_fsync=1 \
      --ioengine=psync --group_reporting >/dev/null
  sync; echo 3 >/proc/sys/vm/drop_caches
}

# bench_kill NODE: kills node NODE and waits until the cluster shows it down.
bench_kill() {
  "$weft" local node kill "$1" --dir "$dir/cluster" >/dev/null
  for _ in $(seq 1 60); do "$weft" node list | grep -q "^$1 .*down" && break; sleep 1; done
}

# bench_repair POLICY: starts a repair at POLICY and prints its id.
bench_repair() {
  "$weft" job start repair --policy "$1" --priority 1 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])'
}

# bench_ended ID: whether job ID has ended.
bench_ended() {
  "$weft" job view "$1" --json | python3 -c 'import json,sys; j=json.load(sys.stdin); sys.exit(0 if j["state"] in ("succeeded","failed","cancelled") else 1)'
}
