#!/usr/bin/env bash
# Block store throughput on one drive directory against dd on the same
# directory, in one run, printed as a markdown table with ratios.
#   WEFT_BENCH_DIR   directory to measure (default: a new dir under /var/tmp)
#   ROUNDS           repetitions (default 3); the table shows each round
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${WEFT_BENCH_DIR:-$(mktemp -d /var/tmp/weft-bench.XXXXXX)}
rounds=${ROUNDS:-3}
mkdir -p "$dir"
go test -c -o /tmp/weft-drive.test ./internal/drive/ >/dev/null
go test -c -o /tmp/weft-block.test ./internal/block/ >/dev/null

ddrate() { # dd's MB/s (decimal) from its last line
  dd "$@" 2>&1 | awk '/copied/ { bytes=$1; for (i=1;i<=NF;i++) if ($i=="copied,") secs=$(i+1) } END { printf "%.0f", bytes/secs/1e6 }'
}
bench() { # test binary, pattern → "name MB/s" lines
  WEFT_BENCH_DIR="$dir" "$1" -test.run XXX -test.bench "$2" -test.benchtime 100x 2>/dev/null |
    awk '/MB\/s/ { for (i=1;i<=NF;i++) if ($(i+1)=="MB/s") print $1, $i }'
}

echo "| round | dd conv=fsync MB/s | dd oflag=dsync MB/s | dd read MB/s | benchmark | MB/s | ÷ dd fsync | ÷ dd dsync | ÷ dd read |"
echo "|---|---|---|---|---|---|---|---|---|"
for r in $(seq 1 "$rounds"); do
  fs=$(ddrate if=/dev/zero of="$dir/dd.fsync" bs=1M count=256 conv=fsync)
  ds=$(ddrate if=/dev/zero of="$dir/dd.dsync" bs=1M count=256 oflag=dsync)
  rd=$(ddrate if="$dir/dd.fsync" of=/dev/null bs=1M)
  rm -f "$dir/dd.fsync" "$dir/dd.dsync"
  { bench /tmp/weft-drive.test . | sed 's/^/drive.&/'; bench /tmp/weft-block.test . | sed 's/^/grpc.&/'; } |
  while read -r name rate; do
    case "$name" in
      *Put*) printf "| %s | %s | %s | %s | %s | %.0f | %.2f | %.2f | |\n" "$r" "$fs" "$ds" "$rd" "$name" "$rate" "$(echo "$rate/$fs" | bc -l)" "$(echo "$rate/$ds" | bc -l)" ;;
      *Get*) printf "| %s | %s | %s | %s | %s | %.0f | | | %.2f |\n" "$r" "$fs" "$ds" "$rd" "$name" "$rate" "$(echo "$rate/$rd" | bc -l)" ;;
    esac
  done
done
[ -n "${WEFT_BENCH_DIR:-}" ] || rm -rf "$dir"
