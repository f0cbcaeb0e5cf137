#!/usr/bin/env bash
# Build here what scripts/gpu-check.sh runs on the GPU machine (which has no Rust), into the
# git-ignored folder .gpu/: the release CLI, the GPU test binary, the shared fields (xz) and,
# where maturin is installed, the Python wheel (.gpu/wheels).
# Then run, through the device tool: carry [".gpu"], command "bash scripts/gpu-check.sh".
# With --natives, also stages the native compressors' sources for scripts/natives.sh
# (scripts/prepare-natives.sh; run that alone after this script to the same effect).
# With --base REF, also builds REF's CLI (a git revision: main, a commit) as .gpu/fzmod-base,
# in a temporary worktree with its own target folder (target/base), for
# scripts/ab-binaries.sh to compare with this tree's in one device call.
set -euo pipefail
cd "$(dirname "$0")/.."
data=${FZMOD_DATA:-../shared/data}
rm -rf .gpu && mkdir -p .gpu/data
cargo build --release -p fzmod-cli
cp target/release/fzmod .gpu/
test_bin=$(cargo test --release -p fzmod --test gpu --no-run --message-format=json 2>/dev/null |
  python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "gpu" and m.get("executable"):
        print(m["executable"])')
cp "$test_bin" .gpu/gpu-tests
for f in "$data"/*.f32 "$data"/*.f64; do xz -T2 -6 -c "$f" > ".gpu/data/$(basename "$f").xz"; done
# The wheel, manylinux2014 (glibc 2.17) through zig so that the GPU machine's pip installs it
# whatever its glibc: a plain build here links against this machine's glibc (2.34 symbols on
# Debian 12). Needs `pip install "maturin>=1.16,<2" ziglang`; without maturin the Python checks
# of gpu-check.sh are skipped.
if ! command -v maturin >/dev/null 2>&1; then
  echo "note: maturin not found (pip install 'maturin>=1.16,<2' ziglang): no wheel, gpu-check.sh skips the Python checks"
elif OUT_DIR=.gpu/wheels bash crates/fzmod-python/build-wheel.sh --zig; then
  unpacked=$(mktemp -d)
  python3 -m zipfile -e .gpu/wheels/*.whl "$unpacked"
  for so in $(find "$unpacked" -name '*.so'); do
    echo "$(basename "$so"): newest glibc symbol $(objdump -T "$so" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)"
  done
  rm -rf "$unpacked"
else
  echo "WARNING: the wheel build failed: gpu-check.sh will skip the Python checks"
  rm -rf .gpu/wheels
fi
if [[ " $* " == *" --natives "* ]]; then
  bash scripts/prepare-natives.sh
fi
if [[ " $* " == *" --base "* ]]; then
  base_ref=$(printf '%s\n' "$@" | sed -n '/^--base$/{n;p;}')
  if [ -z "$base_ref" ] || ! git rev-parse -q --verify "$base_ref^{commit}" >/dev/null; then
    echo "error: --base needs a git revision (main, a commit), got '${base_ref}'" >&2
    exit 2
  fi
  tree=$(mktemp -d)
  trap 'git worktree remove --force "$tree" 2>/dev/null' EXIT
  git worktree add -q --detach "$tree" "$base_ref"
  CARGO_TARGET_DIR=$PWD/target/base cargo build --release -p fzmod-cli --manifest-path "$tree/Cargo.toml"
  cp target/base/release/fzmod .gpu/fzmod-base
  echo "base: $(git rev-parse --short "$base_ref") ($base_ref) as .gpu/fzmod-base"
fi
du -sh .gpu
