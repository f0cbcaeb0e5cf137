#!/usr/bin/env bash
# Prints the path of etopo5 x8 (etopo5_2161x4320.f32 concatenated 8 times: 74,684,160 f32,
# 298.7 MB), the large input of the benchmark scripts, writing it first if it is not there:
# from .gpu/data's xz copy (the GPU machine) or DATA's raw or xz field (e.g. ../shared/data).
#   e8=$(bash scripts/etopo5x8.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
e8=/tmp/etopo5x8_74684160.f32
if [ ! -f "$e8" ]; then
  python3 - "${DATA:-.gpu/data}" "$e8" <<'PY'
import lzma, pathlib, sys
d = pathlib.Path(sys.argv[1])
xz, raw = d / "etopo5_2161x4320.f32.xz", d / "etopo5_2161x4320.f32"
e = lzma.decompress(xz.read_bytes()) if xz.exists() else raw.read_bytes()
pathlib.Path(sys.argv[2]).write_bytes(e * 8)
PY
fi
echo "$e8"
