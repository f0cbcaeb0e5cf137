#!/usr/bin/env python3
"""Seeds for the `region` and `stream` fuzz targets from the golden archives.

Both targets take a tuple through the `arbitrary` crate (1.x) whose first field is the archive
(`Vec<u8>`), so a raw archive is no seed for them: it would be read as a few bytes of archive
and the rest as the other fields. Each seed here is an archive of tests/golden in that encoding
(each byte after a continuation byte 1, then a 0), followed by the rest of the tuple: for
`region`, a few boxes' corners (pairs of u16, each pair after a 1); for `stream` (`--stream`,
the streamed v2.1_*.fzm only), a slab size byte.

    python3 fuzz/region_seeds.py /tmp/fuzz-corpus/region
    cargo +nightly fuzz run region /tmp/fuzz-corpus/region
    python3 fuzz/region_seeds.py --stream /tmp/fuzz-corpus/stream
    cargo +nightly fuzz run stream /tmp/fuzz-corpus/stream
"""
import pathlib
import struct
import sys

BOXES = [[(0, 65535)], [(0, 1), (1, 3), (2, 5)], [(3, 40), (0, 7), (10, 900)], [(5, 2)]]
SLABS = [0, 1, 7]


def encode_archive(archive: bytes) -> bytearray:
    out = bytearray()
    for b in archive:
        out += bytes((1, b))
    out.append(0)
    return out


def encode(archive: bytes, corners: list) -> bytes:
    out = encode_archive(archive)
    for lo, hi in corners:
        out.append(1)
        out += struct.pack("<HH", lo, hi)
    out.append(0)
    return bytes(out)


def main() -> None:
    stream = "--stream" in sys.argv[1:]
    out = pathlib.Path([a for a in sys.argv[1:] if a != "--stream"][0])
    out.mkdir(parents=True, exist_ok=True)
    golden = pathlib.Path(__file__).resolve().parent.parent / "tests" / "golden"
    for archive in sorted(golden.glob("v2.1_*.fzm" if stream else "*.fzm")):
        if stream:
            for slab in SLABS:
                seed = encode_archive(archive.read_bytes()) + bytes((slab,))
                (out / f"{archive.stem}-{slab}").write_bytes(seed)
            continue
        for k, corners in enumerate(BOXES):
            (out / f"{archive.stem}-{k}").write_bytes(encode(archive.read_bytes(), corners))


if __name__ == "__main__":
    main()
