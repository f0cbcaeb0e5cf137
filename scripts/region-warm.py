#!/usr/bin/env python3
"""Region decode through the library on a warm device (issue 16), for docs/PERFORMANCE.md;
not a test. One process: the CUDA context and the kernels are loaded by a first call, as in
an application that decodes many regions; then full decodes and ~1 % boxes are timed.

  python3 scripts/region-warm.py [N] [backend ...]      (default 512, cuda cpu)

The field is stream_field.py's N^3 f32 field, compressed with cuszp2 rel 1e-3 and
chunk="auto". Prints medians of 7 calls (min-max) of wall time per call.
"""
import statistics
import sys
import time

import numpy as np

import fzmod
from stream_field import plane

BOXES = ["10:120,10:120,10:120", "200:310,200:310,200:310", "60:170,60:170,60:170"]


def timed(call, runs=7):
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - t)
    return result, times


def show(times):
    return f"{statistics.median(times) * 1e3:8.2f} ms ({min(times) * 1e3:.2f}-{max(times) * 1e3:.2f})"


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 512
    backends = sys.argv[2:] or ["cuda", "cpu"]
    field = np.stack([plane(z, n, n) for z in range(n)])
    archive = fzmod.compress(field, preset="cuszp2", bound=1e-3, chunk="auto")
    print(f"{n}^3 f32 ({field.nbytes} bytes), cuszp2 rel 1e-3, chunk auto: {len(archive)} archive bytes, "
          f"format {fzmod.inspect(archive)['format_version']}")
    full_reference = fzmod.decompress(archive, backend="cpu")
    for backend in backends:
        fzmod.decompress(archive, backend=backend, region=BOXES[0])  # context, kernels, caches
        full, full_times = timed(lambda: fzmod.decompress(archive, backend=backend))
        assert np.array_equal(full.view(np.uint32), full_reference.view(np.uint32)), backend
        print(f"{backend:>5} full decode      {show(full_times)}")
        for box in BOXES:
            part, times = timed(lambda: fzmod.decompress(archive, backend=backend, region=box))
            slices = tuple(slice(*map(int, r.split(":"))) for r in box.split(","))
            assert np.array_equal(part.view(np.uint32), full_reference[slices].view(np.uint32)), (backend, box)
            speedup = statistics.median(full_times) / statistics.median(times)
            print(f"{backend:>5} region {box}  {show(times)}  {speedup:6.1f}x faster than full")


if __name__ == "__main__":
    main()
