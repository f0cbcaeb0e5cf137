#!/usr/bin/env bash
# Profile one kernel of a `fzmod bench` run with Nsight Compute on the GPU machine (after
# scripts/prepare-gpu.sh here; carry [".gpu"]). Prints the sections that say where a kernel's
# time goes: speed of light, occupancy, launch, scheduler and warp-state statistics.
#   OUT=$OUT [FUSION=off] bash scripts/ncu-kernel.sh KERNEL PRESET BOUND [MODE [SHAPE]]
# e.g. `scripts/ncu-kernel.sh fz_compress cuszp2 18.209 abs` on etopo5 x8 (299 MB, 1-D). The
# fourth launch of KERNEL is profiled (the second call's, where a call launches it twice: with
# FUSION=off, `region_forward cuszp2 1e-3` is AdaptiveBitpack's region of one, `region_forward
# pfpl 1e-3` RZE's).
set -euo pipefail
cd "$(dirname "$0")/.."
kernel=$1 preset=$2 bound=$3 mode=${4:-rel} shape=${5:-74684160}
out=${OUT:-/tmp/fzmod-ncu}
mkdir -p "$out"
e8=$(bash scripts/etopo5x8.sh)
name="$kernel-$preset-$mode-$bound-fusion-${FUSION:-on}"
ncu --kernel-name "$kernel" --launch-skip 3 --launch-count 1 \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section SchedulerStats \
  --section WarpStateStats --section MemoryWorkloadAnalysis \
  -o "$out/$name" -f \
  ./.gpu/fzmod bench "$e8" --dtype f32 --shape "$shape" --preset "$preset" -m "$mode" -e "$bound" \
  --backend cuda --runs 3 --fusion "${FUSION:-on}" > "$out/$name.log" 2>&1 || { tail -20 "$out/$name.log"; exit 1; }
ncu --import "$out/$name.ncu-rep" --page details --print-units base 2>&1 |
  grep -E "Duration|Throughput|Registers|Achieved Occupancy|Theoretical Occupancy|Block Limit|Issued Warp|No Eligible|Active Warps|Eligible Warps|Warp Cycles Per Issued|Shared Memory Config|Dynamic Shared|Static Shared|Threads  |Grid Size|Block Size|Waves" |
  sed "s/^/$name: /"
ncu --import "$out/$name.ncu-rep" --page raw --print-units base 2>/dev/null |
  grep -E "smsp__average_warp_latency_issue_stalled|smsp__average_warps_issue_stalled_[a-z_]+_per_issue_active.ratio " |
  sort -k3 -g -r | head -12 | sed "s/^/$name stall: /"
