#!/usr/bin/env bash
# A/B of two fzmod binaries in one device call, on etopo5 x8 (299 MB): first Nsight Compute's
# duration, warp instructions and registers of the kernels whose names match REGEX in one
# `bench --runs 1` of each binary (its warm-up call and the timed one; caches flushed, the
# GPU's own clocks), then ROUNDS rounds of both binaries' `bench --runs 15` alternating
# (kernel time, medians, compress / decompress GB/s). Kernel time moves a few per cent between
# calls of one binary, so only a same-call comparison says whether a change paid.
# On the GPU machine after `scripts/prepare-gpu.sh --base REF` here (carry [".gpu"]):
#   bash scripts/ab-binaries.sh PRESET-or-TOML SHAPE REGEX [FUSION [BOUND]]
# e.g. `bash scripts/ab-binaries.sh cuszp2 74684160 'region_forward|ab_decode' off`.
# BASE (default .gpu/fzmod-base) and NEW (default .gpu/fzmod) name the binaries.
set -uo pipefail
cd "$(dirname "$0")/.."
pipeline=(--preset "$1")
[[ "$1" == *.toml ]] && pipeline=(--config "$1")
shape=$2 regex=$3 fusion=${4:-on} bound=${5:-1e-3}
base=${BASE:-.gpu/fzmod-base} new=${NEW:-.gpu/fzmod}
for bin in "$base" "$new"; do
  [ -x "$bin" ] || { echo "error: no binary $bin (scripts/prepare-gpu.sh --base REF builds the base)" >&2; exit 2; }
done
e8=$(bash scripts/etopo5x8.sh)
# One bench call's arguments, the binary and --runs apart.
bench=(bench "$e8" --dtype f32 --shape "$shape" "${pipeline[@]}" -m rel -e "$bound" --backend cuda --fusion "$fusion")
echo "$1 $shape --fusion $fusion rel $bound: kernels matching '$regex'"
for bin in "$base" "$new"; do
  ncu --clock-control none --cache-control all --csv --print-units base -k "regex:$regex" \
    --metrics gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread \
    "$bin" "${bench[@]}" --runs 1 2>/dev/null |
    python3 -c '
import collections, csv, sys
rows = [r for r in csv.reader(l for l in sys.stdin if l.startswith("\""))]
if not rows:
    sys.exit(print(f"{sys.argv[1]}: no matching launch"))
head, rows = rows[0], rows[1:]
k, m, v = (head.index(h) for h in ("Kernel Name", "Metric Name", "Metric Value"))
kernels = collections.defaultdict(lambda: collections.defaultdict(list))
for r in rows:
    kernels[r[k][:48]][r[m]].append(float(r[v].replace(",", "")))
# Launches by name, in launch order (one name may be several kernels: every region of one is
# `region_forward`), each with its own registers.
for name, ms in kernels.items():
    us = [round(t / 1e3, 1) for t in ms["gpu__time_duration.sum"]]
    inst = [round(i / 1e6, 1) for i in ms["smsp__inst_executed.sum"]]
    regs = [int(r) for r in ms["launch__registers_per_thread"]]
    print(f"{sys.argv[1]:22s} {name:48s} us {us} M warp instructions {inst} registers {regs}")
' "$(basename "$bin")"
done
for round in $(seq "${ROUNDS:-2}"); do
  for bin in "$base" "$new"; do
    gbs=$("$bin" "${bench[@]}" --runs 15 2>&1 | grep -E '^(ratio|compress|decompress)' | awk '{print $1, ($1 == "ratio" ? $2 : $3)}' | paste -sd' ')
    echo "round $round $(basename "$bin"): $gbs"
  done
done
