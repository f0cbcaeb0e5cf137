#!/usr/bin/env python3
"""How far a preset's coder can go on a masked field when the mask costs nothing (issue 14).

levitus_temp (20x180x360 f32, 44.5 % land as -1e10) at abs = 1e-3 of the ocean's range:
  1. what each preset gets on the field as shipped, with the fill given (--fill-value, the
     Mask stage), with the land as NaN, and as NaN with --mask-nan;
  2. a ceiling: the land replaced by values the preset's coder likes (zero, nearest ocean,
     harmonic, 1-D linear along the storage order, and linear with all-land groups of 4 or
     32 set to zero) and compressed with no mask at all. A real archive must still say where
     the land is, so no fill-and-mask scheme for the preset can beat the best of these rows
     by more than what a better fill would give.

    python3 scripts/masked-ceiling.py target/release/fzmod [../shared/data] [presets]

Needs numpy. Prints two tables (Markdown).
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

SHAPE = (20, 180, 360)
FILL = -1e10
PRESETS = "cuszp,cuszp2,cuszp3-fixed,cuszp3-plain,cuszp3-outlier,fzgpu,pfpl,cusz,mans,interp,interp-fast"


def ratio(fzmod, raw, abs_bound, preset, tmp, *extra):
    out = os.path.join(tmp, "a.fzm")
    shape = "x".join(map(str, SHAPE))
    cmd = [fzmod, "compress", raw, "-o", out, "-f", "-q", "--dtype", "f32", "--shape", shape,
           "--preset", preset, "-m", "abs", "-e", repr(abs_bound), "--backend", "cpu", *extra]
    subprocess.run(cmd, check=True)
    return os.path.getsize(raw) / os.path.getsize(out)


def grow_nearest(field, land):
    """Fill the land front by front with the mean of its already-known 6-neighbours."""
    f = np.where(land, 0.0, field).astype(np.float64)
    known = ~land
    while not known.all():
        total = np.zeros_like(f)
        count = np.zeros_like(f)
        for axis in range(3):
            for shift in (1, -1):
                k = np.roll(known, shift, axis)
                v = np.roll(np.where(known, f, 0.0), shift, axis)
                edge = [slice(None)] * 3
                edge[axis] = 0 if shift == 1 else -1  # no wrap-around
                k[tuple(edge)] = False
                v[tuple(edge)] = 0.0
                total += v
                count += k
        front = ~known & (count > 0)
        f[front] = total[front] / count[front]
        known |= front
    return f


def harmonic(f, land, sweeps=400):
    """Jacobi sweeps of the 6-point average over the land (ocean held fixed)."""
    f = f.copy()
    for _ in range(sweeps):
        p = np.pad(f, 1, mode="edge")
        avg = (p[:-2, 1:-1, 1:-1] + p[2:, 1:-1, 1:-1] + p[1:-1, :-2, 1:-1] + p[1:-1, 2:, 1:-1]
               + p[1:-1, 1:-1, :-2] + p[1:-1, 1:-1, 2:]) / 6
        f[land] = avg[land]
    return f


def linear_with_zero_groups(linear, land, group):
    f = linear.reshape(-1, group).copy()
    f[land.reshape(-1, group).all(axis=1)] = 0.0
    return f.reshape(SHAPE)


def main():
    fzmod = sys.argv[1]
    data = sys.argv[2] if len(sys.argv) > 2 else "../shared/data"
    presets = (sys.argv[3] if len(sys.argv) > 3 else PRESETS).split(",")
    field = np.fromfile(os.path.join(data, "levitus_temp_20x180x360.f32"), dtype=np.float32).reshape(SHAPE)
    land = field == np.float32(FILL)
    ocean = field[~land]
    abs_bound = 1e-3 * float(ocean.max() - ocean.min())
    with tempfile.TemporaryDirectory() as tmp:
        shipped = os.path.join(data, "levitus_temp_20x180x360.f32")
        nan = os.path.join(tmp, "nan.f32")
        np.where(land, np.float32(np.nan), field).astype(np.float32).tofile(nan)
        print(f"levitus_temp, land {land.mean():.1%}, abs {abs_bound:.6g} (rel 1e-3 of the ocean)\n")
        print("| preset | fill kept | fill given (--fill-value) | NaN | NaN, --mask-nan |")
        print("|---|---|---|---|---|")
        for p in presets:
            cells = [ratio(fzmod, shipped, abs_bound, p, tmp), ratio(fzmod, shipped, abs_bound, p, tmp, "--fill-value", "-1e10"),
                     ratio(fzmod, nan, abs_bound, p, tmp), ratio(fzmod, nan, abs_bound, p, tmp, "--mask-nan")]
            print(f"| `{p}` | " + " | ".join(f"{c:.2f}" for c in cells) + " |")

        near = grow_nearest(field, land)
        flat = field.reshape(-1).astype(np.float64)
        at = np.arange(flat.size)
        wet = ~land.reshape(-1)
        linear = np.interp(at, at[wet], flat[wet]).reshape(SHAPE)
        fills = {
            "zero": np.where(land, 0.0, field),
            "nearest (grown front by front)": near,
            "harmonic (400 Jacobi sweeps from nearest)": harmonic(near, land),
            "linear along the storage order": linear,
            "linear, all-land groups of 4 zero": linear_with_zero_groups(linear, land, 4),
            "linear, all-land groups of 32 zero": linear_with_zero_groups(linear, land, 32),
        }
        print("\n| land filled with, no mask stored | " + " | ".join(f"`{p}`" for p in presets) + " |")
        print("|---|" + "---|" * len(presets))
        best = [0.0] * len(presets)
        for name, f in fills.items():
            raw = os.path.join(tmp, "filled.f32")
            f.astype(np.float32).tofile(raw)
            row = [ratio(fzmod, raw, abs_bound, p, tmp) for p in presets]
            best = [max(b, r) for b, r in zip(best, row)]
            print(f"| {name} | " + " | ".join(f"{r:.2f}" for r in row) + " |")
        print("| **best** | " + " | ".join(f"**{b:.2f}**" for b in best) + " |")


if __name__ == "__main__":
    main()
