#!/usr/bin/env python3
"""docs/PERFORMANCE.md, "Outlier lists in the run layout": ratios of every preset (no Mask stage) on levitus (fill kept / NaN land, bound rel 1e-3 of
the valid range, as an absolute bound), etopo5 with every other value NaN, and the shared
fields at rel 1e-3; every element checked (non-finite / fill bit for bit)."""
import json, os, subprocess, sys, tempfile
import numpy as np

D = "/work/shared/data/"
FIELDS = [
    ("echam5_rhumidity_17x96x192.f32", (17, 96, 192)), ("echam5_t_17x96x192.f32", (17, 96, 192)),
    ("etopo5_2161x4320.f32", (2161, 4320)), ("hst_acs_47tuc_sci_1024x1024.f32", (1024, 1024)),
    ("iris_a1b_tas_240x37x49.f32", (240, 37, 49)), ("navy_uwnd_132x73x144.f32", (132, 73, 144)),
    ("navy_vwnd_132x73x144.f32", (132, 73, 144)), ("ncl_vinth2p_T_2x18x64x128.f32", (2, 18, 64, 128)),
    ("trinidad_dem_1201x2401.f32", (1201, 2401)), ("um_theta_15x100x100.f32", (15, 100, 100)),
    ("ncep_hgt500_djf_65x29x49.f64", (65, 29, 49)),
]

def run(binary, data, e, preset, tmp):
    raw, arc, out = (os.path.join(tmp, f) for f in ("in.raw", "a.fzm", "out.raw"))
    data.tofile(raw)
    dt = "f32" if data.dtype == np.float32 else "f64"
    env = dict(os.environ, RAYON_NUM_THREADS="1")
    subprocess.run([binary, "compress", raw, "-o", arc, "--dtype", dt, "--shape", "x".join(map(str, data.shape)),
                    "-m", "abs", "-e", repr(float(e)), "--backend", "cpu", "-q", "-f", "--preset", preset], check=True, env=env)
    subprocess.run([binary, "decompress", arc, "-o", out, "--backend", "cpu", "-q", "-f"], check=True, env=env)
    r = np.fromfile(out, data.dtype).reshape(data.shape)
    bits = f"u{data.itemsize}"
    special = ~np.isfinite(data) | (data == -1e10)
    ok = np.abs(data.astype(np.float64) - r.astype(np.float64)) <= e
    ok[special] = data.view(bits)[special] == r.view(bits)[special]
    return data.nbytes / os.path.getsize(arc), bool(ok.all())

def main():
    # Usage: outlier-runs-ratios.py FZMOD PRESET,PRESET,... [all|masked] [OUT.json]
    binary, presets = sys.argv[1], sys.argv[2].split(",")
    which = sys.argv[3] if len(sys.argv) > 3 else "all"
    cases = []
    lev = np.fromfile(D + "levitus_temp_20x180x360.f32", "<f4").reshape(20, 180, 360)
    valid = lev != np.float32(-1e10)
    e_lev = 1e-3 * (float(lev[valid].max()) - float(lev[valid].min()))
    nan = lev.copy(); nan[~valid] = np.nan
    cases += [("levitus fill", lev, e_lev), ("levitus NaN", nan, e_lev)]
    et = np.fromfile(D + "etopo5_2161x4320.f32", "<f4").reshape(2161, 4320)
    e_et = 1e-3 * (float(et.max()) - float(et.min()))
    etn = et.copy(); etn.reshape(-1)[::2] = np.nan
    cases.append(("etopo5 every other NaN", etn, e_et))
    if which == "all":
        for name, shape in FIELDS:
            x = np.fromfile(D + name, "<f8" if name.endswith("f64") else "<f4").reshape(shape)
            cases.append((name.rsplit("_", 1)[0], x, 1e-3 * (float(x.max()) - float(x.min()))))
    res = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, data, e in cases:
            for p in presets:
                ratio, ok = run(binary, data, e, p, tmp)
                res[f"{label}|{p}"] = (ratio, ok)
                print(f"{label:28s} {p:16s} {ratio:9.3f} {'ok' if ok else 'BOUND MISSED'}", flush=True)
    if len(sys.argv) > 4:
        with open(sys.argv[4], "w") as f:
            json.dump(res, f, indent=1)

main()
