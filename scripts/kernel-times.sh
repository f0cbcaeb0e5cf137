#!/usr/bin/env bash
# Where a compress and a decompress spend their device time, kernel by kernel: Nsight
# Compute's gpu__time_duration of every launch of `fzmod bench --runs 1` (its warm-up call,
# then the timed one: each launch appears twice), in launch order, on etopo5 x8 (299 MB).
# On the GPU machine after scripts/prepare-gpu.sh here (carry [".gpu"]):
#   [FUSION=off] bash scripts/kernel-times.sh PRESET-or-TOML BOUND [MODE [SHAPE]]
# e.g. `scripts/kernel-times.sh scripts/chains/tiled-negabinary-rze.toml 1e-3 rel 17288x4320`.
# With FUSION=off every stage runs its own kernels (named, mostly, by the stage's
# prefix: q_, tl_, lz_, bs_, rze_, ...): each stage's time alone, for its share of the
# DRAM roofline over its input and output bytes.
set -euo pipefail
cd "$(dirname "$0")/.."
pipeline=(--preset "$1")
[[ "$1" == *.toml ]] && pipeline=(--config "$1")
bound=$2 mode=${3:-rel} shape=${4:-74684160}
e8=$(bash scripts/etopo5x8.sh)
ncu --metrics gpu__time_duration.sum --csv --print-units base \
  ./.gpu/fzmod bench "$e8" --dtype f32 --shape "$shape" "${pipeline[@]}" -m "$mode" -e "$bound" \
  --backend cuda --runs 1 --fusion "${FUSION:-on}" 2>/dev/null | python3 -c '
import csv, sys
rows = [r for r in csv.reader(l for l in sys.stdin if l.startswith("\""))]
head, rows = rows[0], rows[1:]
name, value = head.index("Kernel Name"), head.index("Metric Value")
total = 0.0
for r in rows:
    us = float(r[value].replace(",", "")) / 1e3
    total += us
    print(f"{us:10.1f} us  {r[name][:90]}")
print(f"{total:10.1f} us  all {len(rows)} launches (warm-up and timed call)")
'
