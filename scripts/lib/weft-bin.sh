# Shared by the benchmark scripts that measure a given binary: sourced from
# the project root. weft_bin SCRIPT WORK puts the binary to measure at
# WORK/weft-bin — a copy of $WEFT_BIN if set (refused, naming SCRIPT, if it
# is not executable), else one built from this tree — and prints its path.
weft_bin() {
  local script=$1 work=$2
  if [ -n "${WEFT_BIN:-}" ] && [ ! -x "$WEFT_BIN" ]; then
    echo "$script: WEFT_BIN=$WEFT_BIN is not an executable file; build one with 'go build -o weft ./cmd/weft' or unset WEFT_BIN" >&2
    return 2
  fi
  mkdir -p "$work"
  if [ -n "${WEFT_BIN:-}" ]; then cp "$WEFT_BIN" "$work/weft-bin"; else go build -o "$work/weft-bin" ./cmd/weft; fi || return 1
  echo "$work/weft-bin"
}
