#!/usr/bin/env python3
"""A smooth 3-D f32 field with noise, generated plane by plane (nothing stored), for
scripts/stream-measure.sh.

  stream_field.py gen NZ NY NX            write the field (little-endian f32, C order) to stdout
  stream_field.py check NZ NY NX BOUND    read a decoded field from stdin and check every
                                          element against the regenerated original: |x - y| <= BOUND
                                          (in f64, no tolerance); exit 1 on a violation
"""
import sys

import numpy as np


def plane(z, ny, nx):
    y = np.arange(ny, dtype=np.float64)[:, None]
    x = np.arange(nx, dtype=np.float64)[None, :]
    smooth = np.sin(z * 0.01) + 2.0 * np.cos(y * 0.013) * np.sin(x * 0.007 + z * 0.003)
    noise = np.random.default_rng(z).random((ny, nx), dtype=np.float32) * 0.01
    return (smooth + noise).astype("<f4")


def main():
    mode, nz, ny, nx = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    if mode == "gen":
        out = sys.stdout.buffer
        for z in range(nz):
            out.write(plane(z, ny, nx).tobytes())
        out.flush()
        return
    bound = float(sys.argv[5])
    src = sys.stdin.buffer
    buf = bytearray(ny * nx * 4)
    worst = 0.0
    for z in range(nz):
        view = memoryview(buf)
        got = 0
        while got < len(buf):
            n = src.readinto(view[got:])
            if not n:
                sys.exit(f"decoded stream ended in plane {z}")
            got += n
        decoded = np.frombuffer(buf, dtype="<f4").astype(np.float64)
        err = np.abs(decoded - plane(z, ny, nx).ravel().astype(np.float64)).max()
        worst = max(worst, float(err))
        if not err <= bound:
            sys.exit(f"plane {z}: error {err} above the bound {bound}")
    if src.read(1):
        sys.exit("decoded stream longer than the field")
    print(f"checked {nz * ny * nx} values: max abs error {worst:.6g} <= {bound}")


if __name__ == "__main__":
    main()
