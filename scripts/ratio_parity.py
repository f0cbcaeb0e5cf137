#!/usr/bin/env python3
"""Ratio-parity experiment for docs/PERFORMANCE.md ("Ratio parity: fzgpu on trinidad, pfpl at 1e-4").

Emulates on the CPU (numpy) the choices native FZ-GPU and native PFPL make, reports the bound
each really applies and its max error against the strict bound e * (max - min) of the field,
and sizes PFPL's lossless chain (DIFFNB_4 -> BIT_4 -> RZE_1, 16 KiB chunks) on PFPL's words and
on fzmod's Quantizer words, with and without a neighbouring-bin retry for values that miss
the bound. Written from reading the natives' sources; no code taken from them.

Usage: scripts/ratio_parity.py [DATA_DIR]   (numpy; default /work/shared/data)
"""
import sys
import numpy as np

F32 = np.float32
SHAPE = (1201, 2401)


def round_half_away(s):
    """CUDA round()/roundf() on f32 values: ties away from zero (exact for |s| < 2^23)."""
    return (np.sign(s) * np.floor(np.abs(s).astype(np.float64) + 0.5)).astype(np.int64)


# ---------------------------------------------------------------- FZ-GPU (src/fz.cu, lorenzo_var.cuh)
def fzgpu_range(x):
    """fz.cu reads the file into a zero-initialised array padded to whole 4096-byte blocks of
    u16 codes (2048 elements) and takes max - min over the padded array, zeros included."""
    code_bytes = -(-x.size * 2 // 4096) * 4096
    padded = np.zeros(code_bytes // 2, dtype=F32)
    padded[: x.size] = x
    return float(padded.max()) - float(padded.min()), padded.size - x.size


def fzgpu_prequant(x, eb_abs):
    """Pre-quantization q = round(x * (1 / (2 eb))) in f32; 2-D Lorenzo deltas in 16x16 tiles;
    reconstruction q * 2eb in f32 (the tile prefix sums give q back exactly)."""
    q = round_half_away((x * F32(1.0 / (2.0 * eb_abs))).astype(F32))
    a = q.reshape(SHAPE)
    iy = (np.arange(SHAPE[0]) % 16)[:, None] > 0
    ix = (np.arange(SHAPE[1]) % 16)[None, :] > 0
    w = np.where(ix, np.roll(a, 1, 1), 0)
    n = np.where(iy, np.roll(a, 1, 0), 0)
    nw = np.where(ix & iy, np.roll(np.roll(a, 1, 0), 1, 1), 0)
    delta = a - w - n + nw
    y = (q.astype(F32) * F32(2.0 * eb_abs)).astype(F32)
    return np.abs(x.astype(np.float64) - y).max(), int(np.abs(delta).max())


# ---------------------------------------------------------------- PFPL (src/f32_noa_comp_gpu.cu)
def pfpl_words(x, rel):
    """d_QNOA_4: adj = (max - min) * eb in f32, bin = roundf(x * (0.5 / adj)), recon = bin *
    (2 adj) in f32, raw f32 bits when |x - recon| > adj (or the bin is out of range); else
    zigzag(bin)."""
    adj = F32(F32(x.max()) - F32(x.min())) * F32(rel)
    b = round_half_away((x * (F32(0.5) / adj)).astype(F32))
    recon = (b.astype(F32) * (F32(2) * adj)).astype(F32)
    raw = np.abs(x - recon) > adj
    w = ((b << 1) ^ (b >> 63)).astype(np.uint32)
    w[raw] = x.view(np.uint32)[raw]
    err = np.where(raw, 0.0, np.abs(x.astype(np.float64) - recon))
    return w, int(raw.sum()), err.max(), float(adj)


def fzmod_words(x, rel, retry):
    """fzmod's Quantizer, inline words (docs/FORMAT.md 6.1): b = rel * (max - min) in f64,
    h = largest f32 <= b, d = x * (0.5 / h), q = trunc(d + 0.5) - (d < -0.5), x' = (q * h) * 2, kept when
    |x - x'| <= b in f64, else raw bits. retry: a miss tries the neighbouring bin on x's side."""
    b = rel * (float(x.max()) - float(x.min()))
    h = F32(b)
    if float(h) > b:
        h = np.nextafter(h, F32(0))
    d = (x * (F32(0.5) / h)).astype(F32)
    q = np.trunc(d + F32(0.5)).astype(np.int64) - (d < -0.5)  # cuSZp's rounding
    rec = lambda q: ((q.astype(F32) * h).astype(F32) * F32(2)).astype(F32).astype(np.float64)
    xd = x.astype(np.float64)
    miss = ~(np.abs(xd - rec(q)) <= b)
    if retry:
        n = np.where(xd < rec(q), q - 1, q + 1)
        ok = miss & (np.abs(xd - rec(n)) <= b)
        q = np.where(ok, n, q)
        miss &= ~ok
    w = ((q << 1) ^ (q >> 63)).astype(np.uint32)
    w[miss] = x.view(np.uint32)[miss]
    err = np.where(miss, 0.0, np.abs(xd - rec(q)))
    return w, int(miss.sum()), err.max() / b


def rze_len(byts):
    """RZE_1 of one chunk: non-zero bytes, a bitmap of them, three repetition-elimination
    levels of that bitmap (a byte is kept when it differs from the previous one, 0 before the
    first), the last 4-byte level, the 2-byte length."""
    nz = byts != 0
    if not nz.any():
        return 2
    total, bm = int(nz.sum()), np.packbits(nz, bitorder="little")
    for _ in range(3):
        keep = bm != np.concatenate([[0], bm[:-1]])
        total += int(keep.sum())
        bm = np.packbits(keep, bitorder="little")
    return total + bm.size + 2


def bit4(w):
    """BIT_4: per 32 words a 32x32 bit transpose; plane p of every group, plane after plane."""
    n = w.size - w.size % 32
    g = w[:n].reshape(-1, 32)
    bits = ((g[:, :, None] >> np.arange(32, dtype=np.uint32)) & 1).astype(np.uint8)
    planes = np.packbits(bits.transpose(2, 0, 1), axis=2, bitorder="little")
    return np.concatenate([planes.reshape(-1), w[n:].view(np.uint8)])


def pfpl_size(w, chunk=4096):
    """16-byte header, a u16 size per 16 KiB chunk, each chunk DIFFNB_4 -> BIT_4 -> RZE_1 or raw."""
    s, total = np.uint32(0xAAAAAAAA), 16
    for c in range(0, w.size, chunk):
        wc = w[c : c + chunk]
        d = wc - np.concatenate([np.zeros(1, np.uint32), wc[:-1]])
        d = (d + s) ^ s  # negabinary
        total += 2 + min(rze_len(bit4(d)), wc.size * 4)
    return total


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else "/work/shared/data"
    x = np.fromfile(f"{d}/trinidad_dem_1201x2401.f32", dtype=F32)
    lo, hi = float(x.min()), float(x.max())
    r = hi - lo
    print(f"trinidad_dem: min {lo} max {hi} range {r:.6f}")
    rng, pad = fzgpu_range(x)
    print(f"FZ-GPU: {pad} padding zeros; range used {rng:.6f} = {rng / r:.4f} x the field's range")
    for rel in (1e-3, 1e-4):
        err, dmax = fzgpu_prequant(x, rel * rng)
        print(
            f"  rel {rel:g}: native eb {rel * rng:.6f} (strict {rel * r:.6f}); max error {err:.6f} = "
            f"{err / (rel * r):.4f} x strict; max |delta| {dmax} (u16 wrap at 32768)"
        )
    for rel in (1e-3, 1e-4):
        wp, raw, emax, adj = pfpl_words(x, rel)
        sp = pfpl_size(wp)
        print(f"PFPL rel {rel:g}: adj_eb {adj:.7f} (strict {rel * r:.7f}); raw words {raw}; max error "
              f"{emax / (rel * r):.6f} x strict; emulated ratio {x.nbytes / sp:.3f}")
        for retry in (False, True):
            wf, miss, e = fzmod_words(x, rel, retry)
            sf = pfpl_size(wf)
            print(f"  fzmod words{' + neighbour retry' if retry else ''}: raw {miss}, max error {e:.6f} x strict, "
                  f"words != PFPL {int((wf != wp).sum())}, emulated ratio {x.nbytes / sf:.3f}")


if __name__ == "__main__":
    main()
