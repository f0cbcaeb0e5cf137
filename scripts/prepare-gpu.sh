#!/usr/bin/env bash
# Build here what scripts/gpu-check.sh runs on the GPU machine (which has no Rust), into the
# git-ignored folder .gpu/: the release CLI, the GPU test binary and the shared fields (xz).
# Then run, through the device tool: carry [".gpu"], command "bash scripts/gpu-check.sh".
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
du -sh .gpu
