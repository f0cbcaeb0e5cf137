#!/usr/bin/env python3
"""The parsing and reporting half of scripts/natives.sh (native GPU compressors beside fzmod).

natives.sh builds and runs the natives and `fzmod bench`, one folder per case under its work
folder; this file reads those outputs and prints the side-by-side table.

  natives.py report WORK [--md FILE]     parse every case of WORK/cases.list, print the table last
  natives.py maxerr ORIG REC BOUND       max |orig - rec| of two f32 files, and its ratio to BOUND
  natives.py range FILE                  max - min of an f32 file
  natives.py sample TOOL ARGS...         canned output of a native or of fzmod bench (dry mode)
  natives.py selftest                    the parsers against canned and broken outputs

What each native prints, and how it becomes GB/s (1e9 bytes of original data per second):

  PFPL (burtscher/PFPL, f32_noa_{compress,decompress}_cuda): its main() times NUM_RUNS = 9
    calls with CUDA events (compress: reset, minmax of the input with thrust, encode kernel;
    decompress: reset, decode kernel) and prints `lc comp ecltime, %12.9f` (seconds) per call,
    then `original size: %d bytes`, `encoded size: %d bytes`, `compression ratio: %.2f`. We
    take the median of the 9 and the ratio as original / encoded bytes (more digits than %.2f).
  FZ-GPU (szcompressor/FZ-GPU, fz-gpu): one compress and one decompress per process, timed with
    std::chrono around the kernels and a cudaDeviceSynchronize (no warm-up, so the first call's
    module loading is inside); prints `original size: %d`, `compressed size: %ld`,
    `compression ratio: %f`, then with std::cout `compression e2e time: <s> s` and
    `compression e2e throughput: <GiB/s> GB/s` (bytes / 2^30 / s) and the same for
    decompression. We use the seconds (GB/s = bytes / s / 1e9), check them against its GiB/s,
    and take the median over the processes run.
  cuSZp 3.0 (szcompressor/cuSZp, examples/cuSZp.cpp): 10 warm-up compressions, then one timed
    cuSZp_compress and one cuSZp_decompress (CUDA events around the whole call, including its
    small allocations and the size read-back); prints `cuSZp compression   end-to-end speed: %f
    GB/s` where the number is MiB / ms (so ×1.048576 gives 1e9 B/s), `cuSZp compression ratio:
    %f`, and `Pass error check!` or `Fail error check! Exceeding data count: %d` (its check
    allows 1.1 × the bound). We take the median over the processes run.
  fzmod: `fzmod bench --json`: medians of --runs calls timed with CUDA events around all kernels
    of a call, after one warm-up (see docs/PERFORMANCE.md, Method).
"""
import json
import math
import os
import re
import statistics
import sys
from pathlib import Path

CUSZP_UNIT = 1048576 / 1e6  # cuSZp's "GB/s" is MiB per millisecond: × 1.048576 → 1e9 B/s
GIB = 1 << 30
FLOAT = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?inf|nan)"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


class ParseError(Exception):
    """A native's output did not say what its source code prints."""

    def __init__(self, what, text):
        super().__init__(what)
        self.what = what
        self.text = text


def _one(pattern, text, what, conv=float):
    """The single value of a line-anchored pattern; ParseError when absent or repeated."""
    found = re.findall(pattern, text, re.M)
    if not found:
        raise ParseError(f"no line matching {pattern!r} ({what})", text)
    if len(set(found)) > 1:
        raise ParseError(f"{len(found)} different lines matching {pattern!r} ({what}): {found}", text)
    try:
        return conv(found[0])
    except ValueError as e:
        raise ParseError(f"{what}: {found[0]!r} is not a number ({e})", text) from None


def _positive(x, what, text):
    if not (isinstance(x, (int, float)) and math.isfinite(x) and x > 0):
        raise ParseError(f"{what} is {x!r}, not a positive finite number", text)
    return x


# ---------------------------------------------------------------- PFPL

def _ecltimes(step, text):
    """PFPL's `lc <step> ecltime, <seconds>` lines: every timed call, each positive."""
    times = [float(t) for t in re.findall(r"^lc " + step + r" ecltime,\s*" + FLOAT + r"\s*$", text, re.M)]
    if not times:
        raise ParseError(f"no `lc {step} ecltime, <seconds>` lines", text)
    for t in times:
        _positive(t, f"a {step}ress time", text)
    return times


def parse_pfpl_comp(text):
    orig = _one(r"^original size: (\d+) bytes\s*$", text, "PFPL original size", int)
    enc = _one(r"^encoded size: (\d+) bytes\s*$", text, "PFPL encoded size", int)
    printed = _one(r"^compression ratio: " + FLOAT + r"\s*$", text, "PFPL ratio")
    times = _ecltimes("comp", text)
    _positive(orig, "original size", text)
    _positive(enc, "encoded size", text)
    ratio = orig / enc
    if abs(ratio - printed) > 0.006:
        raise ParseError(f"ratio {orig}/{enc} = {ratio:.4f} disagrees with the printed {printed}", text)
    return {"bytes": orig, "encoded": enc, "ratio": ratio, "seconds": times}


def parse_pfpl_decomp(text):
    enc = _one(r"^encoded size: (\d+) bytes\s*$", text, "PFPL encoded size", int)
    dec = _one(r"^decoded size: (\d+) bytes\s*$", text, "PFPL decoded size", int)
    times = _ecltimes("decomp", text)
    _positive(dec, "decoded size", text)
    return {"bytes": dec, "encoded": enc, "seconds": times}


def pfpl_result(comp_text, decomp_text):
    c = parse_pfpl_comp(comp_text)
    d = parse_pfpl_decomp(decomp_text)
    if d["bytes"] != c["bytes"] or d["encoded"] != c["encoded"]:
        raise ParseError(f"decompressor saw {d['encoded']} → {d['bytes']} bytes, compressor {c['bytes']} → "
                         f"{c['encoded']}", comp_text + "\n----- decompress -----\n" + decomp_text)
    notes = []
    if len(c["seconds"]) != 9 or len(d["seconds"]) != 9:
        notes.append(f"{len(c['seconds'])}/{len(d['seconds'])} timed calls, not PFPL's 9")
    return {
        "ratio": c["ratio"],
        "comp_gbps": c["bytes"] / statistics.median(c["seconds"]) / 1e9,
        "decomp_gbps": d["bytes"] / statistics.median(d["seconds"]) / 1e9,
        "best": (c["bytes"] / min(c["seconds"]) / 1e9, d["bytes"] / min(d["seconds"]) / 1e9),
        "calls": f"median of {len(c['seconds'])} / {len(d['seconds'])} event-timed calls",
        "notes": notes,
    }


# ---------------------------------------------------------------- FZ-GPU

def parse_fzgpu(text):
    orig = _one(r"^original size: (\d+)\s*$", text, "FZ-GPU original size", int)
    comp = _one(r"^compressed size: (\d+)\s*$", text, "FZ-GPU compressed size", int)
    printed = _one(r"^compression ratio: " + FLOAT + r"\s*$", text, "FZ-GPU ratio")
    out = {"bytes": _positive(orig, "original size", text), "compressed": _positive(comp, "compressed size", text)}
    out["ratio"] = orig / comp
    if abs(out["ratio"] - printed) > 1e-3 * printed:
        raise ParseError(f"ratio {orig}/{comp} = {out['ratio']:.6f} disagrees with the printed {printed}", text)
    for key, word in (("comp", "compression"), ("decomp", "decompression")):
        secs = _positive(_one(rf"^{word} e2e time: " + FLOAT + r" s\s*$", text, f"FZ-GPU {word} time"),
                         f"{word} time", text)
        gib = _one(rf"^{word} e2e throughput: " + FLOAT + r" GB/s\s*$", text, f"FZ-GPU {word} throughput")
        # Its "GB/s" is GiB/s of float(inputSize) over the same seconds: the two must agree.
        expect = orig / GIB / secs
        if abs(gib - expect) > 2e-3 * expect:
            raise ParseError(f"{word}: {orig} B in {secs} s is {expect:.4f} GiB/s, it printed {gib}", text)
        out[key + "_seconds"] = secs
    if re.search(r"^pre-quantization verification fail", text, re.M):
        out["check"] = "its own check (1.01 × bound) FAILED: u16 codes wrapped"
    elif re.search(r"^pre-quantization verification succeed!", text, re.M):
        out["check"] = "its own check (1.01 × bound) passed"
    else:
        out["check"] = "no verification line"
    m = re.search(r"^PSNR: " + FLOAT, text, re.M)
    if m:
        out["check"] += f", PSNR {float(m.group(1)):.2f} dB"
    return out


def fzgpu_result(texts):
    runs = [parse_fzgpu(t) for t in texts]
    if len({r["compressed"] for r in runs}) > 1:
        raise ParseError(f"compressed sizes differ between runs: {[r['compressed'] for r in runs]}",
                         "\n----- next run -----\n".join(texts))
    n = runs[0]["bytes"]
    comp = [n / r["comp_seconds"] / 1e9 for r in runs]
    dec = [n / r["decomp_seconds"] / 1e9 for r in runs]
    return {
        "ratio": runs[0]["ratio"],
        "comp_gbps": statistics.median(comp),
        "decomp_gbps": statistics.median(dec),
        "best": (max(comp), max(dec)),
        "calls": f"median of {len(runs)} processes, each one chrono-timed first call",
        "notes": [runs[0]["check"]],
    }


# ---------------------------------------------------------------- cuSZp

def parse_cuszp(text):
    clean = ANSI.sub("", text)
    if not re.search(r"^cuSZp finished!\s*$", clean, re.M):
        raise ParseError("no `cuSZp finished!` line", text)
    c = _one(r"^cuSZp compression +end-to-end speed: " + FLOAT + r" GB/s\s*$", clean, "cuSZp compress speed")
    d = _one(r"^cuSZp decompression +end-to-end speed: " + FLOAT + r" GB/s\s*$", clean, "cuSZp decompress speed")
    ratio = _one(r"^cuSZp compression ratio: " + FLOAT + r"\s*$", clean, "cuSZp ratio")
    for x, what in ((c, "compress speed"), (d, "decompress speed"), (ratio, "ratio")):
        _positive(x, what, text)
    if re.search(r"^Pass error check!", clean, re.M):
        check = "its own check (1.1 × bound) passed"
    else:
        m = re.search(r"^Fail error check! Exceeding data count: (\d+)", clean, re.M)
        if not m:
            raise ParseError("neither `Pass error check!` nor `Fail error check!`", text)
        check = f"its own check (1.1 × bound) FAILED on {m.group(1)} values"
    return {"comp_gbps": c * CUSZP_UNIT, "decomp_gbps": d * CUSZP_UNIT, "ratio": ratio, "check": check}


def cuszp_result(texts):
    runs = [parse_cuszp(t) for t in texts]
    if max(r["ratio"] for r in runs) - min(r["ratio"] for r in runs) > 1e-6:
        raise ParseError(f"ratios differ between runs: {[r['ratio'] for r in runs]}",
                         "\n----- next run -----\n".join(texts))
    comp = [r["comp_gbps"] for r in runs]
    dec = [r["decomp_gbps"] for r in runs]
    return {
        "ratio": runs[0]["ratio"],
        "comp_gbps": statistics.median(comp),
        "decomp_gbps": statistics.median(dec),
        "best": (max(comp), max(dec)),
        "calls": f"median of {len(runs)} processes, each one event-timed call after 10 warm-ups, MiB/ms × 1.048576",
        "notes": sorted({r["check"] for r in runs}),
    }


# ---------------------------------------------------------------- fzmod

def fzmod_result(path):
    text = Path(path).read_text()
    try:
        j = json.loads(text)
        out = {
            "ratio": float(j["ratio"]),
            "comp_gbps": float(j["compress_gbps"]["median"]),
            "decomp_gbps": float(j["decompress_gbps"]["median"]),
            "max_abs_error": float(j["max_abs_error"]),
            "runs": int(j["runs"]),
            "method": j.get("timing_method", "?"),
            "device": j.get("device", "?"),
            "backend": j.get("backend", "?"),
        }
    except (ValueError, KeyError, TypeError) as e:
        raise ParseError(f"fzmod bench JSON: {type(e).__name__} {e}", text) from None
    for k in ("ratio", "comp_gbps", "decomp_gbps"):
        _positive(out[k], f"fzmod {k}", text)
    if out["backend"] != "cuda":
        raise ParseError(f"fzmod ran on backend {out['backend']!r}, not cuda", text)
    return out


# ---------------------------------------------------------------- max error

def max_abs_error(orig, rec):
    """Max |orig - rec| over two f32 files, in f64: numpy where present, else the array module
    (small files only)."""
    a, b = Path(orig), Path(rec)
    if a.stat().st_size != b.stat().st_size:
        raise ValueError(f"{a} has {a.stat().st_size} bytes, {b} {b.stat().st_size}")
    try:
        import numpy as np
    except ImportError:
        np = None
    if np is not None:
        x = np.fromfile(a, dtype="<f4")
        y = np.fromfile(b, dtype="<f4")
        err = 0.0
        for i in range(0, x.size, 1 << 24):
            d = np.abs(x[i:i + (1 << 24)].astype(np.float64) - y[i:i + (1 << 24)].astype(np.float64))
            err = max(err, float(d.max(initial=0.0)))
        return err
    if a.stat().st_size > 64 << 20:
        raise ValueError("numpy is missing and the files are too large for the array module")
    import array
    x, y = array.array("f"), array.array("f")
    x.frombytes(a.read_bytes())
    y.frombytes(b.read_bytes())
    if sys.byteorder != "little":
        x.byteswap()
        y.byteswap()
    return max((abs(float(p) - float(q)) for p, q in zip(x, y)), default=0.0)


def value_range(path):
    """max - min of an f32 file, in f64."""
    try:
        import numpy as np
        x = np.fromfile(path, dtype="<f4")
        return float(x.max()) - float(x.min())
    except ImportError:
        import array
        x = array.array("f")
        x.frombytes(Path(path).read_bytes())
        if sys.byteorder != "little":
            x.byteswap()
        return float(max(x)) - float(min(x))


def cmd_maxerr(orig, rec, bound):
    bound = float(bound)
    err = max_abs_error(orig, rec)
    print(f"max abs error {err:.6g}, bound {bound:.6g}, max error / bound {err / bound:.4f}"
          + ("" if err <= bound else "  EXCEEDS THE BOUND"))


# ---------------------------------------------------------------- report

def read_meta(folder):
    meta = {}
    for line in (folder / "meta").read_text().splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            meta[k.strip()] = v.strip()
    return meta


def rc_of(folder, name):
    f = folder / f"{name}.rc"
    if not f.exists():
        return None
    t = f.read_text().strip()
    return int(t) if re.fullmatch(r"-?\d+", t) else t


def tail(text, n=40):
    lines = text.splitlines()
    cut = "" if len(lines) <= n else f"  [... {len(lines) - n} earlier lines]\n"
    return cut + "\n".join("  | " + l for l in lines[-n:])


def native_of(folder, meta):
    """The native's result for a case, or raise RuntimeError / ParseError."""
    tool = meta["native"]
    if (folder / "skip").exists():
        raise RuntimeError((folder / "skip").read_text().strip())
    if tool == "pfpl":
        texts = {}
        for step in ("comp", "decomp"):
            log = folder / f"{step}.log"
            rc = rc_of(folder, step)
            if rc != 0 or not log.exists():
                raise RuntimeError(f"PFPL {step} exited {rc if rc is not None else 'without running'}"
                                   + (f":\n{tail(log.read_text(errors='replace'), 15)}" if log.exists() else ""))
            texts[step] = log.read_text(errors="replace")
        return pfpl_result(texts["comp"], texts["decomp"])
    reps = sorted(folder.glob("rep*.log"), key=lambda p: int(re.sub(r"\D", "", p.stem) or 0))
    ok = [p for p in reps if rc_of(folder, p.stem) == 0]
    if not ok:
        detail = "\n".join(f"{p.name} exited {rc_of(folder, p.stem)}:\n{tail(p.read_text(errors='replace'), 15)}"
                           for p in reps[:1])
        raise RuntimeError(f"{tool}: no successful run of {len(reps)}" + (f"\n{detail}" if detail else ""))
    texts = [p.read_text(errors="replace") for p in ok]
    r = fzgpu_result(texts) if tool == "fzgpu" else cuszp_result(texts)
    if len(ok) < len(reps):
        r["notes"].append(f"{len(reps) - len(ok)} of {len(reps)} runs failed")
    return r


def fmt_gbps(x):
    return f"{x:.0f}" if x >= 100 else f"{x:.1f}"


def report(work, md=None):
    work = Path(work)
    ids = [l.strip() for l in (work / "cases.list").read_text().splitlines() if l.strip()]
    rows, problems, details = [], 0, []
    for cid in ids:
        folder = work / "cases" / cid
        meta = read_meta(folder)
        native, fz = None, None
        ncell = None
        try:
            native = native_of(folder, meta)
        except ParseError as e:
            problems += 1
            ncell = "parse failed"
            print(f"\n### {cid}: the native's output did not parse: {e.what}\n  raw output:\n{tail(e.text, 60)}")
        except RuntimeError as e:
            ncell = next((w for w in ("not built", "skipped") if str(e).startswith(w)), "failed")
            problems += 1
            print(f"\n### {cid}: native {meta['native']}: {e}")
        fjson = folder / "fzmod.json"
        fcell = None
        if (folder / "skip").exists() and rc_of(folder, "fzmod") is None:
            fcell = "skipped"
            problems += 1
        elif rc_of(folder, "fzmod") != 0 or not fjson.exists():
            fcell = "failed"
            problems += 1
            txt = (folder / "fzmod.log").read_text(errors="replace") if (folder / "fzmod.log").exists() else ""
            print(f"\n### {cid}: fzmod bench exited {rc_of(folder, 'fzmod')}:\n{tail(txt, 20)}")
        else:
            try:
                fz = fzmod_result(fjson)
            except ParseError as e:
                problems += 1
                fcell = "parse failed"
                print(f"\n### {cid}: fzmod's JSON did not parse: {e.what}\n{tail(e.text, 40)}")
        check = (folder / "check.txt").read_text().strip() if (folder / "check.txt").exists() else ""
        if native:
            details.append(f"- {meta['label']}: native {native['calls']}; best {fmt_gbps(native['best'][0])} / "
                           f"{fmt_gbps(native['best'][1])} GB/s"
                           + "".join(f"; {n}" for n in native["notes"]) + (f"; {check}" if check else ""))
        if fz:
            bound = float(meta.get("bound", "nan"))
            details.append(f"  fzmod `{meta['preset']}` {meta.get('fzmod_args', '')}: median of {fz['runs']} runs "
                           f"({fz['method']}), max abs error {fz['max_abs_error']:.6g}, "
                           f"max error / bound {fz['max_abs_error'] / bound:.4f}")
        rows.append((meta, native, ncell, fz, fcell))

    lines = ["| case | native ratio | native compress / decompress GB/s | fzmod preset | fzmod ratio | "
             "fzmod GB/s | fzmod / native |", "|---|---|---|---|---|---|---|"]
    for meta, native, ncell, fz, fcell in rows:
        nr = f"{native['ratio']:.3f}" if native else ncell
        ng = f"{fmt_gbps(native['comp_gbps'])} / {fmt_gbps(native['decomp_gbps'])}" if native else ncell
        fr = f"{fz['ratio']:.3f}" if fz else fcell
        fg = f"{fmt_gbps(fz['comp_gbps'])} / {fmt_gbps(fz['decomp_gbps'])}" if fz else fcell
        rel = (f"{fz['comp_gbps'] / native['comp_gbps']:.2f}× / {fz['decomp_gbps'] / native['decomp_gbps']:.2f}×"
               if native and fz else "–")
        lines.append(f"| {meta['label']} | {nr} | {ng} | `{meta['preset']}` | {fr} | {fg} | {rel} |")
    table = "\n".join(lines)
    legend = (
        "GB/s = 1e9 bytes of original data per second, data already on the device; each tool's own timing: "
        "PFPL: CUDA events around its kernels (min/max pass included), median of its 9 calls; "
        "FZ-GPU: std::chrono around its kernels + sync, first call of a process (no warm-up), GiB/s converted, "
        "median over processes; cuSZp: CUDA events around its whole call after 10 warm-ups, MiB/ms × 1.048576, "
        "median over processes; fzmod: `fzmod bench`, CUDA events around all kernels of a call, median of --runs "
        "after one warm-up. Ratios: original bytes / compressed bytes as each tool counts them.")
    if md:
        head = (work / "header.md").read_text() if (work / "header.md").exists() else ""
        Path(md).write_text(head + "\n" + legend + "\n\n" + table + "\n\n" + "\n".join(details) + "\n")
    print("\n== details")
    print("\n".join(details))
    print("\n" + legend + "\n")
    print(table)
    return 1 if problems else 0


# ---------------------------------------------------------------- canned outputs (dry mode)

# Numbers of the same-run table of ANCHOR_NUMBERS.md, keyed by bound or mode.
SAMPLE = {
    "pfpl": {"1e-3": (10.950, 269, 266), "1e-4": (5.804, 263, 262)},
    "fzgpu": {"1e-3": (6.851, 178, 316), "1e-4": (4.218, 164, 312)},
    "cuszp": {"plain": (4.456, 399, 299), "outlier": (8.367, 372, 255), "fixed": (4.278, 401, 326)},
}


def _jitter(i):
    return 1 + 0.01 * ((i * 7) % 5 - 2)


def sample(tool, args):
    """What the tool prints for these arguments, after its printf formats (numbers from the
    anchor table, sizes from the input file). NATIVES_DRY_GARBLE=TOOL drops that tool's last
    line (to see a parse failure reported)."""
    text = _sample(tool, args)
    if os.environ.get("NATIVES_DRY_GARBLE") == tool:
        text = "\n".join(text.splitlines()[:-1]) + "\n"
    return text


def _sample(tool, args):
    if tool == "pfpl-comp":  # input compressed eb
        src, dst, eb = args[0], args[1], args[2]
        n = os.path.getsize(src)
        ratio, c, _ = SAMPLE["pfpl"].get(eb, (3.0, 200, 200))
        enc = round(n / ratio)
        Path(dst).write_bytes(n.to_bytes(4, "little") + bytes(max(enc - 4, 0)))
        out = ["PFPL GPU Single-Precision NOA Compressor", "Copyright 2025 Texas State University", "",
               f"original size: {n} bytes"]
        out += ["lc comp ecltime, %12.9f" % (n / (c * 1e9) * _jitter(i)) for i in range(9)]
        out += [f"encoded size: {enc} bytes", "compression ratio: %.2f" % (n / enc)]
        return "\n".join(out) + "\n"
    if tool == "pfpl-decomp":  # compressed reconstructed (the stub's reconstruction: the input)
        src, dst, orig = args[0], args[1], args[2]
        enc = os.path.getsize(src)
        n = os.path.getsize(orig)
        ratio = n / enc
        eb = min(SAMPLE["pfpl"], key=lambda k: abs(SAMPLE["pfpl"][k][0] - ratio))
        d = SAMPLE["pfpl"][eb][2]
        Path(dst).write_bytes(Path(orig).read_bytes())
        out = ["PFPL GPU Single-Precision NOA Decompressor", "Copyright 2025 Texas State University", "",
               f"encoded size: {enc} bytes"]
        out += ["lc decomp ecltime, %12.9f" % (n / (d * 1e9) * _jitter(i)) for i in range(9)]
        out += [f"decoded size: {n} bytes", "compression ratio: %.2f" % (n / enc)]
        return "\n".join(out) + "\n"
    if tool == "fzgpu":  # input x y z eb
        n = os.path.getsize(args[0])
        ratio, c, d = SAMPLE["fzgpu"].get(args[4], (3.0, 100, 200))
        if int(args[2]) < 4000:  # the 2-D field: launch-bound compression
            c = 41
        comp = round(n / ratio)
        tc, td = n / (c * 1e9), n / (d * 1e9)
        g = lambda x: "%.6g" % x  # std::cout's default
        out = ["begin bitshuffle verification", "begin pre-quantization verification", "PSNR: 84.9012",
               "bitshuffle verification succeed!", "pre-quantization verification succeed!",
               f"original size: {n}", f"compressed size: {comp}", "compression ratio: %f" % (n / comp),
               f"compression e2e time: {g(tc)} s", f"compression e2e throughput: {g(n / GIB / tc)} GB/s",
               f"decompression e2e time: {g(td)} s", f"decompression e2e throughput: {g(n / GIB / td)} GB/s"]
        return "\n".join(out) + "\n"
    if tool == "cuszp":  # its argv: -i F -t f32 -m MODE -d 1 -eb abs E [-o REC]
        a = dict(zip(args[::1], args[1:]))
        ratio, c, d = SAMPLE["cuszp"].get(a.get("-m"), (3.0, 300, 300))
        if "-o" in a:
            Path(a["-o"]).write_bytes(Path(a["-i"]).read_bytes())
        return ("cuSZp finished!\n"
                "cuSZp compression   end-to-end speed: %f GB/s\n" % (c / CUSZP_UNIT)
                + "cuSZp decompression end-to-end speed: %f GB/s\n" % (d / CUSZP_UNIT)
                + "cuSZp compression ratio: %f\n\n" % ratio
                + "\x1b[0;32mPass error check!\x1b[0m\n")
    if tool == "fzmod":  # bench FILE --dtype f32 --shape S --preset P -m M -e E ... --json J
        a = dict(zip(args, args[1:]))
        preset, eb = a["--preset"], a["-e"]
        key = {"pfpl": ("pfpl", eb), "fzgpu": ("fzgpu", eb), "cuszp": ("cuszp", "plain"),
               "cuszp2": ("cuszp", "outlier"), "cuszp3-fixed": ("cuszp", "fixed")}[preset]
        ratio = SAMPLE[key[0]].get(key[1], (3.0, 0, 0))[0]
        bound = float(eb) * (value_range(args[1]) if a["-m"] == "rel" else 1)
        c, d = {"pfpl": (109, 44), "fzgpu": (80, 81)}.get(preset, (483, 447))
        j = {"dataset": args[1], "dtype": "f32", "shape": a["--shape"], "preset": preset, "backend": "cuda",
             "device": "NVIDIA H100 80GB HBM3 (dry run)", "timing_method": "CUDA events around all kernels of a call",
             "runs": int(a.get("--runs", 5)), "ratio": ratio, "max_abs_error": 0.999 * bound,
             "compress_gbps": {"median": c, "min": c * 0.97, "max": c * 1.02},
             "decompress_gbps": {"median": d, "min": d * 0.97, "max": d * 1.02},
             "end_to_end_seconds": {"compress": 0.1, "decompress": 0.1}, "peak_device_bytes": {"compress": 1, "decompress": 1}, "device_path": []}
        Path(a["--json"]).write_text(json.dumps(j, indent=1))
        return (f"dataset      {args[1]} (f32 {a['--shape']})\npipeline     {preset}\n"
                f"ratio        {ratio}   max abs error {0.999 * bound}\n")
    raise SystemExit(f"sample: unknown tool {tool}")


# ---------------------------------------------------------------- self-test

def selftest():
    import tempfile
    failures = 0

    def expect(cond, what):
        nonlocal failures
        print(("ok   " if cond else "FAIL ") + what)
        failures += not cond

    def broken(fn, text, what):
        try:
            fn(text)
        except ParseError as e:
            expect(True, f"{what}: fails loudly ({e.what[:70]})")
        else:
            expect(False, f"{what}: should have failed")

    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp, "in.f32")
        src.write_bytes(bytes(4 * 4320 * 64))
        n = src.stat().st_size
        pc = _sample("pfpl-comp", [str(src), f"{tmp}/c", "1e-3"])
        pd = _sample("pfpl-decomp", [f"{tmp}/c", f"{tmp}/r", str(src)])
        r = pfpl_result(pc, pd)
        expect(abs(r["ratio"] - 10.95) < 0.01, f"PFPL ratio {r['ratio']:.4f} ≈ 10.95")
        expect(abs(r["comp_gbps"] - 269) < 269 * 0.011, f"PFPL compress {r['comp_gbps']:.1f} ≈ 269 GB/s (median of 9)")
        expect(abs(r["decomp_gbps"] - 266) < 266 * 0.011, f"PFPL decompress {r['decomp_gbps']:.1f} ≈ 266 GB/s")
        expect("lc comp ecltime,  0.0" in pc, "PFPL sample keeps %12.9f's padding")
        broken(parse_pfpl_comp, pc.replace("encoded size", "encoded sz"), "PFPL without its encoded size")
        broken(parse_pfpl_comp, "\n".join(l for l in pc.splitlines() if "ecltime" not in l), "PFPL without times")
        broken(parse_pfpl_comp, pc.replace("compression ratio: 10.95", "compression ratio: 12.00"),
               "PFPL whose printed ratio disagrees")
        broken(parse_pfpl_decomp, pd.replace("decoded size", "decoded"), "PFPL decompress without decoded size")
        broken(parse_pfpl_comp, "USAGE: f32_noa_compress_cuda input_file_name ...", "PFPL usage text")

        fz = _sample("fzgpu", [str(src), "4320", "17288", "1", "1e-3"])
        f = fzgpu_result([fz, fz])
        expect(abs(f["ratio"] - 6.851) < 1e-3, f"FZ-GPU ratio {f['ratio']:.4f} ≈ 6.851")
        expect(abs(f["comp_gbps"] - 178) < 0.5 and abs(f["decomp_gbps"] - 316) < 0.5,
               f"FZ-GPU {f['comp_gbps']:.1f} / {f['decomp_gbps']:.1f} ≈ 178 / 316 GB/s (seconds, not its GiB/s)")
        expect("passed" in f["notes"][0], "FZ-GPU verification line read")
        # std::cout may print seconds in scientific notation.
        sci = re.sub(r"^compression e2e time: (\S+) s", lambda m: "compression e2e time: %.5e s" % float(m.group(1)),
                     fz, flags=re.M)
        expect(abs(parse_fzgpu(sci)["comp_seconds"] - parse_fzgpu(fz)["comp_seconds"]) < 1e-9,
               "FZ-GPU seconds in scientific notation")
        expect(parse_fzgpu(fz)["comp_seconds"] != parse_fzgpu(fz)["decomp_seconds"],
               "FZ-GPU compression line not confused with the decompression one")
        broken(parse_fzgpu, fz.replace("compression e2e throughput: ", "compression e2e throughput: 9", 1),
               "FZ-GPU whose GiB/s disagrees with its seconds")
        broken(parse_fzgpu, "\n".join(fz.splitlines()[:7]), "FZ-GPU output cut short")
        broken(parse_fzgpu, "terminate called after throwing an instance of 'std::logic_error'", "FZ-GPU crash")
        failing = fz.replace("pre-quantization verification succeed!",
                             "verification failed at index: 12\npre-quantization verification fail")
        expect("FAILED" in parse_fzgpu(failing)["check"], "FZ-GPU failed verification reported")

        cz = _sample("cuszp", ["-i", str(src), "-t", "f32", "-m", "outlier", "-d", "1", "-eb", "abs", "18.209"])
        c = cuszp_result([cz, cz, cz])
        expect(abs(c["ratio"] - 8.367) < 1e-6, f"cuSZp ratio {c['ratio']}")
        expect(abs(c["comp_gbps"] - 372) < 0.01 and abs(c["decomp_gbps"] - 255) < 0.01,
               f"cuSZp {c['comp_gbps']:.2f} / {c['decomp_gbps']:.2f} GB/s = MiB/ms × 1.048576")
        expect("passed" in c["notes"][0], "cuSZp pass line read through its colour codes")
        fail = cz.replace("\x1b[0;32mPass error check!", "\x1b[0;31mFail error check! Exceeding data count: 3")
        expect("FAILED on 3" in parse_cuszp(fail)["check"], "cuSZp failed check reported")
        broken(parse_cuszp, cz.replace("cuSZp finished!\n", ""), "cuSZp without its finished line")
        broken(parse_cuszp, cz.replace("decompression end-to-end", "decompression e2e"), "cuSZp renamed line")
        broken(parse_cuszp, "Error: Unrecognized option '-x'.", "cuSZp usage error")
        broken(lambda t: cuszp_result([cz, t]), cz.replace("ratio: 8.367", "ratio: 8.4"),
               "cuSZp runs disagreeing on the ratio")

        j = Path(tmp, "b.json")
        _sample("fzmod", ["bench", str(src), "--dtype", "f32", "--shape", "74684160", "--preset", "cuszp2",
                         "-m", "abs", "-e", "18.209", "--runs", "10", "--json", str(j)])
        z = fzmod_result(j)
        expect(z["ratio"] == 8.367 and z["runs"] == 10, "fzmod bench JSON read")
        j.write_text(j.read_text().replace('"compress_gbps"', '"compress_gb"'))
        try:
            fzmod_result(j)
            expect(False, "fzmod JSON without compress_gbps should fail")
        except ParseError as e:
            expect(True, f"fzmod JSON without compress_gbps fails loudly ({e.what[:60]})")

        rec = Path(tmp, "rec.f32")
        import array
        a = array.array("f", [0.0] * 100)
        a[7] = 0.5
        rec.write_bytes(a.tobytes())
        src2 = Path(tmp, "z.f32")
        src2.write_bytes(bytes(400))
        expect(abs(max_abs_error(src2, rec) - 0.5) < 1e-12, "max abs error of two f32 files")
    print(f"selftest: {'all passed' if not failures else f'{failures} FAILED'}")
    return 1 if failures else 0


def main(argv):
    if len(argv) >= 2 and argv[1] == "report":
        md = argv[argv.index("--md") + 1] if "--md" in argv else None
        return report(argv[2], md)
    if len(argv) == 5 and argv[1] == "maxerr":
        cmd_maxerr(*argv[2:])
        return 0
    if len(argv) == 3 and argv[1] == "range":
        print(repr(value_range(argv[2])))
        return 0
    if len(argv) >= 3 and argv[1] == "sample":
        sys.stdout.write(sample(argv[2], argv[3:]))
        return 0
    if len(argv) == 2 and argv[1] == "selftest":
        return selftest()
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
