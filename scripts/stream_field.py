#!/usr/bin/env python3
"""A smooth 3-D f32 field with noise, generated plane by plane (nothing stored), for
scripts/stream-measure.sh.

  stream_field.py gen NZ NY NX            write the field (little-endian f32, C order) to stdout
  stream_field.py fastgen NZ NY NX        the same kind of field at pipe speed, for inputs of
                                          100 GB: 16 distinct planes, each repeat shifted by a
                                          per-plane offset (fast_plane)
  stream_field.py check NZ NY NX BOUND    read a decoded field from stdin and check every
                                          element against the regenerated original: |x - y| <= BOUND
                                          (in f64, no tolerance); exit 1 on a violation
  stream_field.py fastcheck Z0 NZ NY NX BOUND
                                          the same for NZ planes of the fastgen field from plane Z0
                                          (a decoded region of whole planes)
"""
import sys

import numpy as np


def plane(z, ny, nx):
    y = np.arange(ny, dtype=np.float64)[:, None]
    x = np.arange(nx, dtype=np.float64)[None, :]
    smooth = np.sin(z * 0.01) + 2.0 * np.cos(y * 0.013) * np.sin(x * 0.007 + z * 0.003)
    noise = np.random.default_rng(z).random((ny, nx), dtype=np.float32) * 0.01
    return (smooth + noise).astype("<f4")


BASE_PLANES = 16


def fast_plane(z, base):
    """Plane z of the fastgen field: a stored plane plus an offset, all in f32."""
    return base[z % BASE_PLANES] + np.float32((z % 1000) * 1e-3)


def main():
    mode = sys.argv[1]
    z0 = 0
    if mode == "fastcheck":
        z0 = int(sys.argv.pop(2))
    nz, ny, nx = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    field = plane
    if mode in ("fastgen", "fastcheck"):
        base = [plane(z, ny, nx) for z in range(BASE_PLANES)]
        field = lambda z, ny, nx: fast_plane(z, base)
    if mode in ("gen", "fastgen"):
        out = sys.stdout.buffer
        for z in range(nz):
            out.write(field(z, ny, nx).tobytes())
        out.flush()
        return
    bound = float(sys.argv[5])
    src = sys.stdin.buffer
    buf = bytearray(ny * nx * 4)
    worst = 0.0
    for z in range(z0, z0 + nz):
        view = memoryview(buf)
        got = 0
        while got < len(buf):
            n = src.readinto(view[got:])
            if not n:
                sys.exit(f"decoded stream ended in plane {z}")
            got += n
        decoded = np.frombuffer(buf, dtype="<f4").astype(np.float64)
        err = np.abs(decoded - field(z, ny, nx).ravel().astype(np.float64)).max()
        worst = max(worst, float(err))
        if not err <= bound:
            sys.exit(f"plane {z}: error {err} above the bound {bound}")
    if src.read(1):
        sys.exit("decoded stream longer than the field")
    print(f"checked {nz * ny * nx} values: max abs error {worst:.6g} <= {bound}")


if __name__ == "__main__":
    main()
