#!/usr/bin/env bash
# Build the fzmod wheel into OUT_DIR (default target/wheels): the HDF5 filter plugin first
# (crates/fzmod-hdf5, shipped inside the wheel), then the extension module with maturin.
# Extra arguments go to `maturin build` (e.g. --zig for a manylinux2014 extension).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${OUT_DIR:-$root/target/wheels}"
cargo build --release -p fzmod-hdf5 --manifest-path "$root/Cargo.toml"
mkdir -p "$here/python/fzmod/hdf5_plugin"
cp "$root/target/release/libh5fzmod.so" "$here/python/fzmod/hdf5_plugin/"
cd "$here"
maturin build --release --out "$out" "$@"
