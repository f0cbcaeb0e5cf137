#!/usr/bin/env python3
"""One-core speed of fzmod's CPU backend against SZ3 (pysz) at the same value-range bound.

For each shared field and rel bound, SZ3 (OpenMP off) and `fzmod bench --backend cpu` with
RAYON_NUM_THREADS=1 are timed in alternating rounds (so load changes on a shared machine hit
both alike); each side's speed is the median over all its timed runs. Prints the fzmod / SZ3
ratio of compress and decompress speed per case and the geometric mean per preset.

    python3 -m venv /work/venv-cpu && /work/venv-cpu/bin/pip install numpy pysz
    cargo build --release -p fzmod-cli
    /work/venv-cpu/bin/python scripts/cpu-vs-sz3.py --fzmod $CARGO_TARGET_DIR/release/fzmod
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
from pysz import sz, szConfig, szErrorBoundMode

FIELDS = [
    ("etopo5_2161x4320.f32", (2161, 4320), "f32"),
    ("hst_acs_47tuc_sci_1024x1024.f32", (1024, 1024), "f32"),
    ("navy_vwnd_132x73x144.f32", (132, 73, 144), "f32"),
    ("echam5_t_17x96x192.f32", (17, 96, 192), "f32"),
    ("ncep_hgt500_djf_65x29x49.f64", (65, 29, 49), "f64"),
]
BOUNDS = [1e-2, 1e-3, 1e-4]
PRESETS = ["pfpl", "cuszp3-plain", "cuszp2", "cuszp", "cuszp3-fixed", "cuszp3-outlier", "fzgpu"]


def sz3_runs(data, rel, runs):
    """Compress and decompress `runs` times after one warm-up; seconds of each."""
    conf = szConfig(data.shape)
    conf.errorBoundMode = szErrorBoundMode.REL
    conf.relErrorBound = rel
    conf.openmp = False
    comp, _ = sz.compress(data, conf)
    sz.decompress(comp, data.dtype, data.shape)
    c, d = [], []
    for _ in range(runs):
        t = time.perf_counter()
        comp, _ = sz.compress(data, conf)
        c.append(time.perf_counter() - t)
        t = time.perf_counter()
        sz.decompress(comp, data.dtype, data.shape)
        d.append(time.perf_counter() - t)
    return c, d, data.nbytes / comp.nbytes


def fzmod_run(binary, path, shape, dtype, preset, rel, runs):
    """Median compress / decompress GB/s of one `fzmod bench` call, and its ratio."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "bench.json")
        cmd = [binary, "bench", path, "--dtype", dtype, "--shape", "x".join(map(str, shape)),
               "--preset", preset, "-m", "rel", "-e", str(rel), "--backend", "cpu",
               "--runs", str(runs), "--json", out]
        env = dict(os.environ, RAYON_NUM_THREADS="1")
        subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
        with open(out) as f:
            r = json.load(f)
    return r["compress_gbps"]["median"], r["decompress_gbps"]["median"], r["ratio"]


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fzmod", required=True, help="release fzmod binary")
    ap.add_argument("--data", default="/work/shared/data")
    ap.add_argument("--presets", default=",".join(PRESETS))
    ap.add_argument("--runs", type=int, default=5, help="timed runs per round and side")
    ap.add_argument("--rounds", type=int, default=2, help="alternating rounds per case")
    ap.add_argument("--fields", default="", help="comma-separated file-name prefixes (default: all five)")
    args = ap.parse_args()
    presets = args.presets.split(",")
    fields = [f for f in FIELDS if not args.fields or any(f[0].startswith(p) for p in args.fields.split(","))]

    # ratios[preset] = list of (compress ratio to SZ3, decompress ratio to SZ3)
    ratios = {p: [] for p in presets}
    print(f"{'field':<34} {'rel':>6} {'SZ3 c/d MB/s':>14}  " + "  ".join(f"{p:>17}" for p in presets))
    for name, shape, dtype in fields:
        path = os.path.join(args.data, name)
        data = np.fromfile(path, "<f4" if dtype == "f32" else "<f8").reshape(shape)
        for rel in BOUNDS:
            sz_c, sz_d = [], []
            fz = {p: ([], []) for p in presets}
            for _ in range(args.rounds):
                c, d, _ = sz3_runs(data, rel, args.runs)
                sz_c += c
                sz_d += d
                for p in presets:
                    gc, gd, _ = fzmod_run(args.fzmod, path, shape, dtype, p, rel, args.runs)
                    fz[p][0].append(gc * 1e3)
                    fz[p][1].append(gd * 1e3)
            szc = data.nbytes / statistics.median(sz_c) / 1e6
            szd = data.nbytes / statistics.median(sz_d) / 1e6
            cells = []
            for p in presets:
                rc = statistics.median(fz[p][0]) / szc
                rd = statistics.median(fz[p][1]) / szd
                ratios[p].append((rc, rd))
                cells.append(f"{rc:7.2f}x / {rd:5.2f}x")
            print(f"{name:<34} {rel:>6g} {szc:6.0f} / {szd:5.0f}  " + "  ".join(cells), flush=True)
    print()
    print("geometric mean of fzmod / SZ3 speed, one core (compress / decompress):")
    for p in presets:
        rs = ratios[p]
        print(f"  {p:<16} {geomean([r[0] for r in rs]):5.2f}x / {geomean([r[1] for r in rs]):5.2f}x"
              f"   (min {min(r[0] for r in rs):.2f}x / {min(r[1] for r in rs):.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
