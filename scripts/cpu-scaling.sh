#!/usr/bin/env bash
# CPU backend scaling over cores (issue 12: "near-linear scaling to all cores"): `fzmod bench
# --backend cpu` of each preset on etopo5 x8 (299 MB; 17288x4320 for the 2-D presets) at rel
# 1e-3 with RAYON_NUM_THREADS = 1, 2, 4, ... up to the machine's cores, and a table of the
# median GB/s and the speed-up over one thread. Runs where a release CLI is: here
# (FZMOD=target/release/fzmod) or on the GPU machine from .gpu/ (prepare-gpu.sh), whose host
# has more cores than the 2-core development machine.
#   bash scripts/cpu-scaling.sh [PRESET ...]   (FZMOD, DATA, RUNS, THREADS, FUSION=on|off,
#   SHAPE=17288x4320 for every preset overridable)
set -euo pipefail
cd "$(dirname "$0")/.."
fzmod=${FZMOD:-.gpu/fzmod}
runs=${RUNS:-3}
fusion=${FUSION:-on}
presets=("$@")
[ ${#presets[@]} -gt 0 ] || presets=(cuszp2 pfpl fzgpu cusz mans interp-fast interp)
cores=$(nproc)
threads=${THREADS:-$(t=1; while [ $t -lt "$cores" ]; do echo -n "$t "; t=$((2 * t)); done; echo "$cores")}
e8=$(bash scripts/etopo5x8.sh)
echo "$(lscpu | sed -n 's/^Model name: *//p'), $cores cores; fzmod bench --backend cpu, etopo5 x8, rel 1e-3, fusion $fusion, median of $runs"
printf '%-12s %8s %18s %18s\n' preset threads "compress GB/s (x)" "decompress GB/s (x)"
for p in "${presets[@]}"; do
  shape=74684160
  [[ $p == fzgpu || $p == cusz || $p == mans || $p == interp* ]] && shape=17288x4320
  shape=${SHAPE:-$shape}
  c1='' d1=''
  for t in $threads; do
    out=$(RAYON_NUM_THREADS=$t $fzmod bench $e8 --dtype f32 --shape $shape --preset "$p" -m rel -e 1e-3 \
      --backend cpu --fusion "$fusion" --runs "$runs" 2>&1)
    c=$(awk '/^compress/{print $3}' <<< "$out") d=$(awk '/^decompress/{print $3}' <<< "$out")
    [ -z "$c1" ] && c1=$c d1=$d
    awk -v p="$p" -v t="$t" -v c="$c" -v d="$d" -v c1="$c1" -v d1="$d1" \
      'BEGIN { printf "%-12s %8s %10.2f (%4.1f) %10.2f (%4.1f)\n", p, t, c, c / c1, d, d / d1 }'
  done
done
