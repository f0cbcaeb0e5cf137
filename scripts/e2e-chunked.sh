#!/usr/bin/env bash
# End to end through the host (issue 16): `cuszp2` on etopo5 ×8 from a host array to archive
# bytes and back into a reused host array, as one archive (`fzmod bench`: its end-to-end line)
# and as chunked archives on the GPU's lanes (`fzmod bench --chunk`: wall clock of the whole
# call), interleaved over ROUNDS rounds. Device machine, after scripts/prepare-gpu.sh:
#   OUT=$OUT bash scripts/e2e-chunked.sh
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/fzmod-e2e}
mkdir -p "$out"
E8=$(bash scripts/etopo5x8.sh)
bench() { # label bench-arguments...: prints compress / decompress GB/s including transfers
  local label=$1; shift
  ./.gpu/fzmod bench $E8 --dtype f32 --shape 74684160 --preset cuszp2 --backend cuda --runs "${RUNS:-10}" "$@" \
    > "$out/e2e-$label.txt" 2>&1 || { echo "$label failed: $(tail -1 "$out/e2e-$label.txt")"; return; }
  local gbps
  if grep -q "^end-to-end" "$out/e2e-$label.txt"; then
    gbps=$(awk '/^end-to-end/ {print $3 " / " $6}' "$out/e2e-$label.txt")
  else
    gbps=$(awk '/^compress/ {c=$3} /^decompress/ {d=$3} END {print c " / " d}' "$out/e2e-$label.txt")
  fi
  printf '%-34s %-30s ratio %s\n' "$label" "$gbps" "$(awk '/^ratio/ {print $2}' "$out/e2e-$label.txt")"
}
for round in $(seq "${ROUNDS:-2}"); do
  for bound in "abs 18.209" "rel 1e-3"; do
    set -- $bound
    bench "r$round-unchunked-$1" -m "$1" -e "$2"
    for chunk in ${CHUNKS:-2097152 4194304 8388608}; do
      bench "r$round-chunk$chunk-$1" -m "$1" -e "$2" --chunk "$chunk"
    done
  done
done
