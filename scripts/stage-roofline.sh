#!/usr/bin/env bash
# Issue 12 item 3: every stage's own kernels (what `--fusion off` runs and what a region falls
# back to) against the DRAM roofline. For each case below, Nsight Compute measures every launch
# of `fzmod bench --runs 1 --fusion off` (its warm-up call, then the timed one) on etopo5 x8
# (299 MB): duration, DRAM bytes read and written, at the GPU's own clocks (`--clock-control
# none`: Nsight's default locks them to base) and with caches flushed before each launch.
# Launches are summed by kernel name: calls, microseconds per call, DRAM MB per call, GB/s and
# the share of the device's copy bandwidth (measured first, with CuPy: the practical roofline).
# The stage's minimal traffic (its input read once, its output written once) is for the reader
# to set beside the DRAM bytes: docs/PERFORMANCE.md does, stage by stage.
# FUSION=on profiles the fused kernels instead.
# On the GPU machine after scripts/prepare-gpu.sh here (carry [".gpu"]):
#   OUT=$OUT bash scripts/stage-roofline.sh [CASE-NAME...]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp}/stage-roofline
mkdir -p "$out"
e8=$(bash scripts/etopo5x8.sh)
python3 - <<'PY'
import cupy as cp
n = 74684160
a = cp.ones(n, dtype=cp.float32)
b = cp.empty_like(a)
start, stop = cp.cuda.Event(), cp.cuda.Event()
times = []
for _ in range(25):
    start.record()
    b[...] = a
    stop.record()
    stop.synchronize()
    times.append(cp.cuda.get_elapsed_time(start, stop))
t = sorted(times)[len(times) // 2]
print(f"copy roofline: {2 * 4 * n / t / 1e6:.0f} GB/s (a {4 * n / 1e6:.0f} MB device copy, read + write, median of 25)")
open("/tmp/copy-gbs", "w").write(f"{2 * 4 * n / t / 1e6:.1f}")
PY
# name | pipeline | shape; every case at rel 1e-3
cases=(
  "cuszp2|--preset cuszp2|74684160"
  "pfpl|--preset pfpl|74684160"
  "fzgpu|--preset fzgpu|17288x4320"
  "mans|--preset mans|17288x4320"
  "cusz|--preset cusz|17288x4320"
  "interp-fast|--preset interp-fast|17288x4320"
  "tiled-chain|--config scripts/chains/tiled-negabinary-rze.toml|17288x4320"
  "nd-chain|--config scripts/chains/nd-lorenzo-zigzag-rze.toml|17288x4320"
  "nd-chain-1d|--config scripts/chains/nd-lorenzo-zigzag-rze.toml|74684160"
  "block-chain|--config scripts/chains/block-lorenzo-zigzag-rze.toml|74684160"
)
for case in "${cases[@]}"; do
  IFS='|' read -r name pipeline shape <<<"$case"
  if [ $# -gt 0 ] && [[ " $* " != *" $name "* ]]; then continue; fi
  # shellcheck disable=SC2086 # the pipeline is two words on purpose
  ncu --clock-control none --cache-control all --csv --print-units base \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
    ./.gpu/fzmod bench "$e8" --dtype f32 --shape "$shape" $pipeline -m rel -e 1e-3 \
    --backend cuda --runs 1 --fusion "${FUSION:-off}" >"$out/$name.csv" 2>"$out/$name.log" || {
    echo "$name: ncu failed (see $out/$name.log)"
    continue
  }
  python3 - "$name" "$out/$name.csv" <<'PY'
import csv, sys
from collections import OrderedDict
name, path = sys.argv[1], sys.argv[2]
copy = float(open("/tmp/copy-gbs").read())
rows = list(csv.reader(l for l in open(path) if l.startswith('"')))
head, rows = rows[0], rows[1:]
col = {k: head.index(k) for k in ("ID", "Kernel Name", "Metric Name", "Metric Value")}
launches = OrderedDict()
for r in rows:
    launch = launches.setdefault(r[col["ID"]], {"name": r[col["Kernel Name"]]})
    launch[r[col["Metric Name"]]] = float(r[col["Metric Value"]].replace(",", ""))
# Generated region kernels share a name: the n-th launch of a name within one bench call
# (calls = launches of the first kernel, the range pass) is told apart as name#n.
names = [l["name"].split("(")[0][:60] for l in launches.values()]
calls = max(1, names.count(names[0]))
seen = {}
kernels = OrderedDict()
for kname, l in zip(names, launches.values()):
    per_call = max(1, names.count(kname) // calls)
    j = seen.get(kname, 0)
    seen[kname] = j + 1
    if per_call > 1:
        kname = f"{kname}#{j % per_call}"
    k = kernels.setdefault(kname, [0, 0.0, 0.0])
    k[0] += 1
    k[1] += l["gpu__time_duration.sum"] / 1e3
    k[2] += (l["dram__bytes_read.sum"] + l["dram__bytes_write.sum"]) / 1e6
print(f"\n## {name} (--fusion off, {len(launches)} launches)")
print(f"{'calls':>5} {'us/call':>9} {'MB/call':>8} {'GB/s':>6} {'copy%':>5}  kernel")
for kname, (calls, us, mb) in kernels.items():
    gbs = mb / us * 1e3 if us else 0.0
    print(f"{calls:5d} {us / calls:9.1f} {mb / calls:8.1f} {gbs:6.0f} {100 * gbs / copy:5.0f}  {kname}")
PY
done
