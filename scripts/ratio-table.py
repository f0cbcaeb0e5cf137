#!/usr/bin/env python3
"""Compression-ratio table for docs/PERFORMANCE.md ("Ratio table: every preset against SZ3,
ZFP and quantize + pcodec"): every fzmod preset × every shared field × value-range-relative
bound 1e-2 / 1e-3 / 1e-4, and the masked levitus_temp rows.

Every compressor gets the same *absolute* bound, e = rel × (max − min) of the field's values
(for levitus_temp: of its valid values, fill and NaN excluded), and every element of every
reconstruction is checked against it (masked points: bit-identical for fzmod; a cell that
misses the bound is printed with "!"). Ratio = original bytes / compressed bytes. One core:

- fzmod: the release CLI, `fzmod compress … -m abs -e E --backend cpu` (RAYON_NUM_THREADS=1),
  whole archive file; then `fzmod decompress` and the check here. Masked runs add
  `--fill-value -1e10` (fill kept) or `--mask-nan` (NaN land), i.e. the preset with a Mask
  stage in front (`fzmod::masked_preset`), or `--config docs/examples/masked-*.toml`.
- SZ3: pysz 1.1.0 (`szErrorBoundMode.ABS`, OpenMP off).
- ZFP: zfpy fixed-accuracy mode, `tolerance = E`.
- quantize + pcodec: q = rint(x / (2(E − u))), u = the data type's spacing at max |x|, as int32 (int64 when it does not fit),
  flattened in C order, `pcodec.standalone.simple_compress` with its default config (level 8,
  automatic delta); compressed size = pcodec bytes + 8 (the step).

Rerun (about 10 minutes on one core):

    python3 -m venv /work/venv-ratio && /work/venv-ratio/bin/pip install numpy pysz==1.1.0 zfpy pcodec
    cargo build --release -p fzmod-cli
    /work/venv-ratio/bin/python scripts/ratio-table.py --fzmod $CARGO_TARGET_DIR/release/fzmod \\
        [--json ratios.json] [--fields etopo5,hst] [--skip-masked]

It prints the two Markdown tables of PERFORMANCE.md.
"""

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

FIELDS = [
    ("echam5_rhumidity_17x96x192.f32", (17, 96, 192), "f32"),
    ("echam5_t_17x96x192.f32", (17, 96, 192), "f32"),
    ("etopo5_2161x4320.f32", (2161, 4320), "f32"),
    ("hst_acs_47tuc_sci_1024x1024.f32", (1024, 1024), "f32"),
    ("iris_a1b_tas_240x37x49.f32", (240, 37, 49), "f32"),
    ("navy_uwnd_132x73x144.f32", (132, 73, 144), "f32"),
    ("navy_vwnd_132x73x144.f32", (132, 73, 144), "f32"),
    ("ncl_vinth2p_T_2x18x64x128.f32", (2, 18, 64, 128), "f32"),
    ("trinidad_dem_1201x2401.f32", (1201, 2401), "f32"),
    ("um_theta_15x100x100.f32", (15, 100, 100), "f32"),
    ("ncep_hgt500_djf_65x29x49.f64", (65, 29, 49), "f64"),
]
LEVITUS = ("levitus_temp_20x180x360.f32", (20, 180, 360), "f32")
LEVITUS_FILL = -1e10
BOUNDS = [1e-2, 1e-3, 1e-4]
HERE = os.path.dirname(os.path.abspath(__file__))


def short(name):
    """The field's name without its shape and type: etopo5, navy_uwnd, hst_acs_47tuc_sci …"""
    return name.rsplit("_", 1)[0]


def within(orig, recon, e, masked=None):
    """Every element within e (f64 arithmetic); masked elements bit-identical."""
    o = orig.astype(np.float64)
    r = recon.astype(np.float64)
    if masked is None:
        masked = ~np.isfinite(orig)
    ok = np.abs(o - r) <= e
    bits = f"u{orig.itemsize}"
    ok[masked] = orig.view(bits)[masked] == recon.view(bits)[masked]
    return bool(ok.all())


class Fzmod:
    def __init__(self, binary, tmp):
        self.binary = binary
        self.tmp = tmp
        self.env = dict(os.environ, RAYON_NUM_THREADS="1")

    def run(self, data, e, preset=None, config=None, extra=(), check_mask=None):
        raw = os.path.join(self.tmp, "in.raw")
        arc = os.path.join(self.tmp, "a.fzm")
        out = os.path.join(self.tmp, "out.raw")
        data.tofile(raw)
        dtype = "f32" if data.dtype == np.float32 else "f64"
        cmd = [self.binary, "compress", raw, "-o", arc, "--dtype", dtype,
               "--shape", "x".join(map(str, data.shape)), "-m", "abs", "-e", repr(float(e)),
               "--backend", "cpu", "-q", "-f", *extra]
        cmd += ["--config", config] if config else ["--preset", preset]
        subprocess.run(cmd, check=True, env=self.env)
        subprocess.run([self.binary, "decompress", arc, "-o", out, "--backend", "cpu", "-q", "-f"],
                       check=True, env=self.env)
        recon = np.fromfile(out, data.dtype).reshape(data.shape)
        ok = within(data, recon, e, check_mask)
        return data.nbytes / os.path.getsize(arc), ok


def sz3(data, e, valid=None):
    from pysz import sz, szConfig, szErrorBoundMode
    conf = szConfig(data.shape)
    conf.errorBoundMode = szErrorBoundMode.ABS
    conf.absErrorBound = float(e)
    conf.openmp = False
    comp, _ = sz.compress(np.ascontiguousarray(data), conf)
    recon = sz.decompress(comp, data.dtype, data.shape)
    recon = recon[0] if isinstance(recon, tuple) else recon
    sel = np.ones(data.shape, bool) if valid is None else valid
    ok = bool((np.abs(data[sel].astype(np.float64) - recon[sel].astype(np.float64)) <= e).all())
    return data.nbytes / comp.nbytes, ok


def zfp(data, e):
    import zfpy
    comp = zfpy.compress_numpy(np.ascontiguousarray(data), tolerance=float(e))
    recon = zfpy.decompress_numpy(comp)
    return data.nbytes / len(comp), within(data, recon, e)


def quant_pcodec(data, e):
    from pcodec import ChunkConfig, standalone
    # The reconstruction is rounded to the data type: keep that rounding inside the bound.
    ulp = float(np.spacing(np.abs(data).max()))
    step = 2.0 * (e - ulp)
    q = np.rint(data.astype(np.float64) / step)
    qi = q.astype(np.int32) if np.abs(q).max() < 2 ** 31 - 1 else q.astype(np.int64)
    comp = standalone.simple_compress(qi.ravel(), ChunkConfig())
    recon = (standalone.simple_decompress(comp).astype(np.float64) * step).astype(data.dtype).reshape(data.shape)
    return data.nbytes / (len(comp) + 8), within(data, recon, e)


def cell(r):
    ratio, ok = r
    return f"{ratio:.2f}" + ("" if ok else "!")


def presets(binary):
    out = subprocess.run([binary, "presets"], check=True, capture_output=True, text=True).stdout
    names = []
    for line in out.splitlines():
        word = line.split()[0] if line.split() else ""
        if word and not word.endswith(":") and word[0].islower():
            names.append(word)
    return names


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fzmod", required=True, help="release fzmod binary")
    ap.add_argument("--data", default="/work/shared/data")
    ap.add_argument("--presets", default="", help="comma-separated (default: all of `fzmod presets`)")
    ap.add_argument("--fields", default="", help="comma-separated file-name prefixes (default: all)")
    ap.add_argument("--json", default="", help="also write every measurement here")
    ap.add_argument("--skip-masked", action="store_true")
    ap.add_argument("--only-masked", action="store_true")
    args = ap.parse_args()
    names = args.presets.split(",") if args.presets else presets(args.fzmod)
    fields = [f for f in FIELDS if not args.fields or any(f[0].startswith(p) for p in args.fields.split(","))]
    results = {"presets": names, "fields": {}, "masked": {}}
    tmp = tempfile.mkdtemp(prefix="ratio-table-")
    fz = Fzmod(args.fzmod, tmp)

    if not args.only_masked:
        head = ["field", "rel"] + [f"`{p}`" for p in names] + ["SZ3", "ZFP", "q+pcodec"]
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for name, shape, dtype in fields:
            data = np.fromfile(os.path.join(args.data, name), "<f4" if dtype == "f32" else "<f8").reshape(shape)
            rng = float(data.max()) - float(data.min())
            for rel in BOUNDS:
                e = rel * rng
                row = {p: fz.run(data, e, preset=p) for p in names}
                row["SZ3"] = sz3(data, e)
                row["ZFP"] = zfp(data, e)
                row["q+pcodec"] = quant_pcodec(data, e)
                results["fields"].setdefault(name, {})[str(rel)] = row
                best = max(row[p][0] for p in names)
                cells = [("**" + cell(row[p]) + "**") if row[p][0] == best else cell(row[p]) for p in names]
                cells += [cell(row[k]) for k in ("SZ3", "ZFP", "q+pcodec")]
                print(f"| {short(name)} | {rel:g} | " + " | ".join(cells) + " |", flush=True)

    if not args.skip_masked:
        name, shape, _ = LEVITUS
        fill = np.fromfile(os.path.join(args.data, name), "<f4").reshape(shape)
        land = fill == np.float32(LEVITUS_FILL)
        nan = fill.copy()
        nan[land] = np.nan
        valid = fill[~land]
        rng = float(valid.max()) - float(valid.min())
        examples = sorted(glob.glob(os.path.join(HERE, "..", "docs", "examples", "masked-*.toml")))
        rows = {}
        for rel in BOUNDS:
            e = rel * rng
            for variant, data, flag in (("fill", fill, ["--fill-value", repr(LEVITUS_FILL)]), ("nan", nan, ["--mask-nan"])):
                for p in names:
                    # Without a mask the fill must come back within the bound (it does: an
                    # outlier or a huge code); with one, bit for bit.
                    plain = fz.run(data, e, preset=p, check_mask=np.isnan(data))
                    masked = fz.run(data, e, preset=p, extra=flag, check_mask=land)
                    rows.setdefault(f"`{p}`", {})[(variant, rel)] = plain
                    rows.setdefault(f"`{p}` + mask", {})[(variant, rel)] = masked
                for ex in examples:
                    label = os.path.basename(ex)[:-5]
                    rows.setdefault(f"{label}.toml", {})[(variant, rel)] = fz.run(data, e, config=ex, check_mask=land)
            # SZ3: the fill kept as it is (SZ3 stores it as an unpredictable value within the
            # bound); the NaN variant with NaN replaced by 0 (SZ3 cannot take NaN), mask not stored.
            rows.setdefault("SZ3", {})[("fill", rel)] = sz3(fill, e)
            zero = np.where(land, np.float32(0), fill).astype(np.float32)
            rows["SZ3"][("nan", rel)] = sz3(zero, e, valid=~land)
        results["masked"] = {k: {f"{v}/{r}": val for (v, r), val in d.items()} for k, d in rows.items()}
        print()
        head = ["pipeline"] + [f"{v} {r:g}" for v in ("−1e10 fill", "NaN land") for r in BOUNDS]
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        order = [f"`{p}`" for p in names] + [f"`{p}` + mask" for p in names]
        # An example file that measures exactly as "preset + mask" (the same pipeline) is named
        # on that row instead of a row of its own.
        label = {k: k for k in rows}
        for k in [k for k in rows if k.endswith(".toml")]:
            twin = f"`{k[len('masked-'):-len('.toml')]}` + mask"
            if rows.get(twin) == rows[k]:
                label[twin] = f"{twin} (= {k})"
                del rows[k]
        order += [k for k in rows if k.endswith(".toml")] + ["SZ3"]
        for k in order:
            cells = [cell(rows[k][(v, r)]) for v in ("fill", "nan") for r in BOUNDS]
            print(f"| {label[k]} | " + " | ".join(cells) + " |", flush=True)

    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
