"""Overhead of the Python paths against the Rust library, on the CPU backend.

    python overhead.py FZMOD_CLI FIELD.f32 ROWSxCOLS [--rounds N]

The Rust side is `fzmod bench` (wall clock around `Pipeline::compress` / `decompress`, data
in memory, after a warm-up). The Python side times, the same way, `fzmod.compress` /
`fzmod.decompress` on the whole field, then on one 1 MiB chunk (512x512 f32): the call
itself, the numcodecs codec, and a Zarr v3 array of such chunks in a MemoryStore (total time
divided by the number of chunks). Rounds alternate Rust and Python so that load from other
processes hits both; the table reports the fastest run of each (the least disturbed).
"""

import argparse
import json
import subprocess
import tempfile
import time

import numpy
import zarr

import fzmod
from fzmod.numcodecs import Fzmod
from fzmod.zarr import FzmodCodec

SETTINGS = {"preset": "cuszp2", "mode": "rel", "bound": 1e-3, "backend": "cpu"}
CHUNK = (512, 512)  # 1 MiB of float32


def rust_seconds(cli, path, shape, runs):
    """Fastest compress and decompress seconds of `fzmod bench`."""
    with tempfile.NamedTemporaryFile(suffix=".json") as report:
        subprocess.run(
            [cli, "bench", path, "--dtype", "f32", "--shape", "x".join(map(str, shape)), "--preset", "cuszp2",
             "-m", "rel", "-e", "1e-3", "--backend", "cpu", "--runs", str(runs), "--json", report.name],
            check=True, capture_output=True,
        )
        result = json.load(open(report.name))
    nbytes = numpy.prod(shape) * 4
    return nbytes / result["compress_gbps"]["max"] / 1e9, nbytes / result["decompress_gbps"]["max"] / 1e9


def fastest(function, runs):
    function()  # warm-up, as `fzmod bench` does
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best


def zarr_seconds_per_chunk(field):
    """Write then read a whole Zarr v3 array of 1 MiB chunks; seconds per chunk."""
    store = zarr.storage.MemoryStore()
    array = zarr.create_array(store=store, shape=field.shape, chunks=CHUNK, dtype=field.dtype,
                              serializer=FzmodCodec(**SETTINGS), compressors=None)
    chunks = numpy.prod([n // c for n, c in zip(field.shape, CHUNK)])
    start = time.perf_counter()
    array[:] = field
    write = time.perf_counter() - start
    start = time.perf_counter()
    array[:]
    read = time.perf_counter() - start
    return write / chunks, read / chunks


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("cli")
    parser.add_argument("field")
    parser.add_argument("shape")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    shape = tuple(int(n) for n in args.shape.split("x"))
    field = numpy.fromfile(args.field, dtype=numpy.float32).reshape(shape)
    chunk = numpy.ascontiguousarray(field[:CHUNK[0], :CHUNK[1]])
    # Whole chunks only, so every chunk costs the same.
    tiled = numpy.ascontiguousarray(field[: shape[0] // CHUNK[0] * CHUNK[0], : shape[1] // CHUNK[1] * CHUNK[1]])
    codec = Fzmod(**SETTINGS)
    archive, chunk_archive = fzmod.compress(field, **SETTINGS), fzmod.compress(chunk, **SETTINGS)

    with tempfile.NamedTemporaryFile(suffix=".f32") as chunk_file:
        chunk.tofile(chunk_file.name)
        best = {}

        def keep(name, seconds):
            best[name] = min(best.get(name, float("inf")), seconds)

        for _ in range(args.rounds):
            rc, rd = rust_seconds(args.cli, args.field, shape, 3)
            keep("rust whole compress", rc)
            keep("rust whole decompress", rd)
            keep("python whole compress", fastest(lambda: fzmod.compress(field, **SETTINGS), 3))
            keep("python whole decompress", fastest(lambda: fzmod.decompress(archive), 3))
            rc, rd = rust_seconds(args.cli, chunk_file.name, CHUNK, 30)
            keep("rust chunk compress", rc)
            keep("rust chunk decompress", rd)
            keep("python chunk compress", fastest(lambda: fzmod.compress(chunk, **SETTINGS), 30))
            keep("python chunk decompress", fastest(lambda: fzmod.decompress(chunk_archive), 30))
            keep("numcodecs chunk compress", fastest(lambda: codec.encode(chunk), 30))
            keep("numcodecs chunk decompress", fastest(lambda: codec.decode(chunk_archive), 30))
            write, read = zarr_seconds_per_chunk(tiled)
            keep("zarr chunk compress", write)
            keep("zarr chunk decompress", read)

    print(f"fzmod {fzmod.__version__}, {SETTINGS}, field {args.field} {shape}, chunk {CHUNK} f32")
    print("| path | compress ms | vs Rust | decompress ms | vs Rust |")
    print("|---|---|---|---|---|")
    for scope in ["whole", "chunk"]:
        rust_c, rust_d = best[f"rust {scope} compress"], best[f"rust {scope} decompress"]
        paths = ["rust", "python"] if scope == "whole" else ["rust", "python", "numcodecs", "zarr"]
        for path in paths:
            c, d = best[f"{path} {scope} compress"], best[f"{path} {scope} decompress"]
            print(f"| {path} ({scope}) | {c * 1e3:.2f} | {(c / rust_c - 1) * 100:+.1f} % "
                  f"| {d * 1e3:.2f} | {(d / rust_d - 1) * 100:+.1f} % |")


if __name__ == "__main__":
    main()
