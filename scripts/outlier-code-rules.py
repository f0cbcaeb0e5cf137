#!/usr/bin/env python3
"""docs/PERFORMANCE.md, "Outlier codes": what an outlier's code would be worth to each preset,
on levitus_temp (land as NaN, bound rel 1e-3 of the valid range given as an absolute bound).
A rule is emulated without changing fzmod: the land is filled with the reconstruction of the
code the rule gives it (x̂ = (q·h)·2 in f32, which quantizes back to q), fzmod compresses the
filled field (no outliers left), and the real archive's outlier channel is added back as the
difference between the real archive and the zero-code emulation (so the "zero" row is the real
ratio of a build that gives outliers code 0). Rules, all in linear index order: the valid code
before the outlier within its aligned group of G elements, else the one after it, else 0;
"prev" without the group (the Mask stage's fill); "tile-predicted": LorenzoQuant's rule
(docs/FORMAT.md 6.5) in 8×8×32 tiles."""
import os, subprocess, sys, tempfile
import numpy as np

F = np.float32

def main():
    # Usage: outlier-code-rules.py FZMOD PRESET,PRESET,...
    binary, presets = sys.argv[1], sys.argv[2].split(",")
    lev = np.fromfile("/work/shared/data/levitus_temp_20x180x360.f32", "<f4").reshape(20, 180, 360)
    valid = lev != F(-1e10)
    e = 1e-3 * (float(lev[valid].max()) - float(lev[valid].min()))
    step = F(e)
    if float(step) > e:
        step = np.nextafter(step, F(0))
    recip = F(0.5) / step
    recon = lambda q: (q.astype(F) * step).astype(F) * F(2)
    x = np.where(valid, lev, F(0))
    d = (x * recip).astype(F)
    q = np.trunc((d + F(0.5)).astype(F)).astype(np.int64)
    q = np.where(d >= F(-0.5), q, q - 1)
    miss = np.abs(x.astype(np.float64) - recon(q).astype(np.float64)) > e  # bin edge: the other bin
    q = np.where(miss & (x < recon(q)), q - 1, np.where(miss, q + 1, q)).astype(np.int32)
    nan = np.where(valid, lev, F(np.nan))
    v, qf = valid.reshape(-1), q.reshape(-1)
    idx = np.arange(v.size)

    def group_rule(group):
        last = np.maximum.accumulate(np.where(v, idx, -1))
        nxt = np.minimum.accumulate(np.where(v, idx, v.size)[::-1])[::-1]
        lp, ln = np.maximum(last, 0), np.minimum(nxt, v.size - 1)
        okp, okn = (last >= 0) & (group[lp] == group), (nxt < v.size) & (group[ln] == group)
        return np.where(v, qf, np.where(okp, qf[lp], np.where(okn, qf[ln], 0)))

    def tile_predicted(tz=8, ty=8, tx=32):
        p = np.where(valid, q, 0).astype(np.int64)
        nz, ny, nx = p.shape
        for z in range(nz):
            for y in range(ny):
                for xx in range(nx):
                    if valid[z, y, xx]:
                        continue
                    s = 0
                    for dz, dy, dx in [(a, b, c) for a in (0, 1) for b in (0, 1) for c in (0, 1)][1:]:
                        if (dz and z % tz == 0) or (dy and y % ty == 0) or (dx and xx % tx == 0):
                            continue
                        s += (1 if (dz + dy + dx) % 2 else -1) * p[z - dz, y - dy, xx - dx]
                    p[z, y, xx] = s
        return p.reshape(-1)

    rules = {"zero": np.where(v, qf, 0), "prev": group_rule(np.zeros(v.size, np.int64))}
    for g in (4, 8, 16, 32, 64, 256, 2048):
        rules[f"group {g}"] = group_rule(idx // g)
    rules["tile-predicted"] = tile_predicted()
    env = dict(os.environ, RAYON_NUM_THREADS="1")
    with tempfile.TemporaryDirectory() as tmp:
        raw, arc = os.path.join(tmp, "in.raw"), os.path.join(tmp, "a.fzm")

        def size(data, preset):
            data.tofile(raw)
            subprocess.run([binary, "compress", raw, "-o", arc, "--dtype", "f32", "--shape", "20x180x360", "-m", "abs",
                            "-e", repr(e), "--backend", "cpu", "-q", "-f", "--preset", preset], check=True, env=env)
            return os.path.getsize(arc)

        channel = {p: size(nan, p) - size(recon(rules["zero"]).reshape(lev.shape), p) for p in presets}
        print(f"{'rule':16s}" + "".join(f"{p:>16s}" for p in presets))
        for name, codes in rules.items():
            filled = recon(codes).reshape(lev.shape)
            print(f"{name:16s}" + "".join(f"{nan.nbytes / (size(filled, p) + channel[p]):16.2f}" for p in presets), flush=True)

main()
