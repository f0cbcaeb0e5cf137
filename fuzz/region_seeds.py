#!/usr/bin/env python3
"""Seeds for the `region` fuzz target from the golden archives.

The target takes `(archive bytes, box corners)` through the `arbitrary` crate (1.x), so a raw
archive is no seed for it: it would be read as a few bytes of archive and the rest as corners.
Each seed here is an archive of tests/golden in that encoding (each byte after a continuation
byte 1, then a 0), followed by a few boxes' corners (pairs of u16, each pair after a 1).

    python3 fuzz/region_seeds.py /tmp/fuzz-corpus/region
    cargo +nightly fuzz run region /tmp/fuzz-corpus/region
"""
import pathlib
import struct
import sys

BOXES = [[(0, 65535)], [(0, 1), (1, 3), (2, 5)], [(3, 40), (0, 7), (10, 900)], [(5, 2)]]


def encode(archive: bytes, corners: list) -> bytes:
    out = bytearray()
    for b in archive:
        out += bytes((1, b))
    out.append(0)
    for lo, hi in corners:
        out.append(1)
        out += struct.pack("<HH", lo, hi)
    out.append(0)
    return bytes(out)


def main() -> None:
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    golden = pathlib.Path(__file__).resolve().parent.parent / "tests" / "golden"
    for archive in sorted(golden.glob("*.fzm")):
        for k, corners in enumerate(BOXES):
            (out / f"{archive.stem}-{k}").write_bytes(encode(archive.read_bytes(), corners))


if __name__ == "__main__":
    main()
