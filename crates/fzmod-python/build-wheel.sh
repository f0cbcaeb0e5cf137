#!/usr/bin/env bash
# Build the fzmod wheel into OUT_DIR (default target/wheels): the HDF5 filter plugin first
# (crates/fzmod-hdf5, shipped inside the wheel), then the extension module with maturin.
# Extra arguments go to `maturin build`. With --zig (needs `pip install ziglang`) the plugin,
# too, is linked by zig against glibc 2.17, so the whole wheel is manylinux2014.
# CARGO_TARGET_DIR is honoured: the plugin is copied from where cargo put it, never from a
# stale build in the default target/.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${OUT_DIR:-$root/target/wheels}"
mkdir -p "$out" && out="$(cd "$out" && pwd)"  # maturin runs from this folder
target="${CARGO_TARGET_DIR:-$root/target}"
mkdir -p "$target" && target="$(cd "$target" && pwd)"  # relative paths mean the caller's folder
plugin_dir="$here/python/fzmod/hdf5_plugin"
mkdir -p "$plugin_dir"
if [[ " $* " == *" --zig "* ]]; then
  triple="$(uname -m)-unknown-linux-gnu"
  linker="$target/zig-plugin/zig-cc.sh"
  mkdir -p "$(dirname "$linker")"
  printf '#!/bin/sh\nexec maturin zig cc -- -target %s-linux-gnu.2.17 -g "$@"\n' "$(uname -m)" >"$linker"
  chmod +x "$linker"
  linker_var="CARGO_TARGET_$(echo "$triple" | tr 'a-z-' 'A-Z_')_LINKER"
  env "$linker_var=$linker" CARGO_TARGET_DIR="$target/zig-plugin" \
    cargo build --release -p fzmod-hdf5 --target "$triple" --manifest-path "$root/Cargo.toml"
  cp "$target/zig-plugin/$triple/release/libh5fzmod.so" "$plugin_dir/"
else
  CARGO_TARGET_DIR="$target" cargo build --release -p fzmod-hdf5 --manifest-path "$root/Cargo.toml"
  cp "$target/release/libh5fzmod.so" "$plugin_dir/"
fi
cd "$here"
CARGO_TARGET_DIR="$target" maturin build --release --out "$out" "$@"
