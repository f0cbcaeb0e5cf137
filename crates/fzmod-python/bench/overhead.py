"""Overhead of the Python paths against the Rust library (CPU backend, cuszp2, rel 1e-3).

    cargo build --release -p fzmod-python --example baseline
    export RAYON_NUM_THREADS=1 MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=4294967296
    python overhead.py target/release/examples/baseline FIELD.f32 ROWSxCOLS

The Rust side is examples/baseline.rs: the library's embedding API called directly
(`Compressor` built once, compressing a borrowed slice; `fzmod::decompress`). The Python side times `fzmod.compress` / `fzmod.decompress` on the
whole field and on one 1 MiB chunk (512x512 f32), the numcodecs codec on that chunk, and a
Zarr v3 array of such chunks in a MemoryStore (its time divided by the number of chunks).

Both sides report process CPU time per call (mean after a warm-up; `time.process_time` and
its C clock), which other processes on a shared machine disturb far less than wall time,
and the fastest wall time. Rounds alternate the two sides so drifting load hits both; the
table keeps each measurement's best round. One rayon thread keeps the work on one core.
The malloc settings stop glibc from returning freed megabytes to the kernel after every call
in the small Rust process (measured: ~480 page faults per 1 MiB compress without them, ~4
in Python's larger heap), which would charge the Rust side for an allocator artefact.
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


def rust(baseline, path, shape, runs):
    out = subprocess.run([baseline, path, "x".join(map(str, shape)), str(runs)], check=True, capture_output=True)
    return json.loads(out.stdout)


def time_calls(runs, call):
    """Mean CPU seconds per call and fastest wall seconds, after one warm-up call."""
    call()
    fastest = float("inf")
    cpu_start = time.process_time()
    for _ in range(runs):
        start = time.perf_counter()
        call()
        fastest = min(fastest, time.perf_counter() - start)
    return (time.process_time() - cpu_start) / runs, fastest


def zarr_per_chunk(field, runs, serializer):
    """Write then read a Zarr v3 array of 1 MiB chunks: per-chunk CPU and wall seconds."""
    array = zarr.create_array(store=zarr.storage.MemoryStore(), shape=field.shape, chunks=CHUNK,
                              dtype=field.dtype, serializer=serializer, compressors=None)
    chunks = int(numpy.prod([n // c for n, c in zip(field.shape, CHUNK)]))

    def write():
        array[:] = field

    write_cpu, write_wall = time_calls(runs, write)
    read_cpu, read_wall = time_calls(runs, lambda: array[:])
    return write_cpu / chunks, write_wall / chunks, read_cpu / chunks, read_wall / chunks


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("baseline")
    parser.add_argument("field")
    parser.add_argument("shape")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    shape = tuple(int(n) for n in args.shape.split("x"))
    field = numpy.fromfile(args.field, dtype=numpy.float32).reshape(shape)
    chunk = numpy.ascontiguousarray(field[: CHUNK[0], : CHUNK[1]])
    # Whole chunks only, so that every chunk costs about the same.
    tiled = numpy.ascontiguousarray(field[: shape[0] // CHUNK[0] * CHUNK[0], : shape[1] // CHUNK[1] * CHUNK[1]])
    codec = Fzmod(**SETTINGS)
    archive, chunk_archive = fzmod.compress(field, **SETTINGS), fzmod.compress(chunk, **SETTINGS)
    best = {}

    def keep(name, cpu, wall):
        old = best.get(name, (float("inf"), float("inf")))
        best[name] = (min(old[0], cpu), min(old[1], wall))

    with tempfile.NamedTemporaryFile(suffix=".f32") as chunk_file:
        chunk.tofile(chunk_file.name)
        for _ in range(args.rounds):
            for scope, path, data, runs in [("whole", args.field, field, 5), ("chunk", chunk_file.name, chunk, 100)]:
                r = rust(args.baseline, path, data.shape, runs)
                keep(f"rust {scope} compress", r["compress_cpu"], r["compress_wall"])
                keep(f"rust {scope} decompress", r["decompress_cpu"], r["decompress_wall"])
            keep("python whole compress", *time_calls(5, lambda: fzmod.compress(field, **SETTINGS)))
            keep("python whole decompress", *time_calls(5, lambda: fzmod.decompress(archive)))
            keep("python chunk compress", *time_calls(100, lambda: fzmod.compress(chunk, **SETTINGS)))
            keep("python chunk decompress", *time_calls(100, lambda: fzmod.decompress(chunk_archive)))
            keep("numcodecs chunk compress", *time_calls(100, lambda: codec.encode(chunk)))
            keep("numcodecs chunk decompress", *time_calls(100, lambda: codec.decode(chunk_archive)))
            for name, serializer in [("zarr", FzmodCodec(**SETTINGS)), ("zarr-uncompressed", "auto")]:
                write_cpu, write_wall, read_cpu, read_wall = zarr_per_chunk(tiled, 3, serializer)
                keep(f"{name} chunk compress", write_cpu, write_wall)
                keep(f"{name} chunk decompress", read_cpu, read_wall)

    print(f"fzmod {fzmod.__version__}, {SETTINGS}, {args.field} {shape}, chunks {CHUNK} f32, {args.rounds} rounds")
    print("| path | compress CPU ms/call | vs Rust | fastest wall ms | decompress CPU ms/call | vs Rust | fastest wall ms |")
    print("|---|---|---|---|---|---|---|")
    # Zarr's own per-chunk work (selection, copies, asyncio, store) is the uncompressed
    # array's cost; subtracted, what remains is the codec's, comparable with the Rust call.
    for direction in ["compress", "decompress"]:
        zarr_cost, floor = best[f"zarr chunk {direction}"], best[f"zarr-uncompressed chunk {direction}"]
        best[f"zarr minus uncompressed chunk {direction}"] = (zarr_cost[0] - floor[0], zarr_cost[1] - floor[1])
    chunk_paths = ["rust", "python", "numcodecs", "zarr", "zarr-uncompressed", "zarr minus uncompressed"]
    for scope, paths in [("whole", ["rust", "python"]), ("chunk", chunk_paths)]:
        rust_c, rust_d = best[f"rust {scope} compress"][0], best[f"rust {scope} decompress"][0]
        for path in paths:
            (cc, cw), (dc, dw) = best[f"{path} {scope} compress"], best[f"{path} {scope} decompress"]
            print(f"| {path} ({scope}) | {cc * 1e3:.2f} | {(cc / rust_c - 1) * 100:+.1f} % | {cw * 1e3:.2f} "
                  f"| {dc * 1e3:.2f} | {(dc / rust_d - 1) * 100:+.1f} % | {dw * 1e3:.2f} |")


if __name__ == "__main__":
    main()
