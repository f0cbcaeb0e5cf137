#!/usr/bin/env bash
# Streaming and chunking measurements for docs/PERFORMANCE.md ("Streamed and chunked
# archives"); not a test. Release build, CPU backend:
#   cargo build --release -p fzmod-cli
#   PYTHON=/path/to/python-with-numpy scripts/stream-measure.sh [big|region|ratio|all]
# big:    a 2048x1024x1024 f32 field (8 GiB; NZ=... to change) generated into a pipe,
#         compress --stream from the pipe to a file, decompress the file into a pipe that a
#         checker reads (every element against the bound); peak RSS of fzmod by /usr/bin/time -v.
# region: a 512x512x512 f32 field (512 MiB) on disk, chunked (auto chunks): full decode vs a
#         ~1 % box (inside four chunks, straddling eight, straddling eighteen), wall time (ms)
#         and bytes read; BACKEND=cuda decodes (and compresses) on the GPU (default cpu).
# ratio:  every preset, unchunked vs --chunk auto (or CHUNK=SHAPE), on three shared fields and
#         the 512x512x512 field of region.
set -euo pipefail
cd "$(dirname "$0")/.."
FZ=${FZMOD:-${CARGO_TARGET_DIR:-target}/release/fzmod}
PY=${PYTHON:-python3}
WORK=${WORK:-$(mktemp -d)}
DATA=${DATA:-/work/shared/data}
part=${1:-all}
BACKEND=${BACKEND:-cpu}
echo "fzmod: $FZ   scratch: $WORK   cores: $(nproc)"

rss() { grep -E "Maximum resident|Elapsed" "$1" | sed 's/^\s*/    /'; }

if [[ $part == big || $part == all ]]; then
  NZ=${NZ:-2048}; NY=1024; NX=1024; E=1e-3
  echo "== streamed ${NZ}x${NY}x${NX} f32 ($((NZ * NY * NX * 4)) bytes), cuszp2 abs $E"
  "$PY" scripts/stream_field.py gen $NZ $NY $NX |
    /usr/bin/time -v -o "$WORK/c.time" "$FZ" compress - --stream --dtype f32 --shape ${NZ}x${NY}x${NX} \
      --preset cuszp2 -m abs -e $E --backend cpu -o "$WORK/big.fzm" --progress --report -f
  rss "$WORK/c.time"
  /usr/bin/time -v -o "$WORK/d.time" "$FZ" decompress "$WORK/big.fzm" -o - --backend cpu --progress |
    "$PY" scripts/stream_field.py check $NZ $NY $NX $E
  rss "$WORK/d.time"
  rm -f "$WORK/big.fzm"
fi

if [[ $part == region || $part == all ]]; then
  N=512
  echo "== region decode of a ${N}^3 f32 field ($((N * N * N * 4)) bytes)"
  "$PY" scripts/stream_field.py gen $N $N $N >"$WORK/cube.f32"
  "$FZ" compress "$WORK/cube.f32" --dtype f32 --shape ${N}x${N}x${N} --chunk auto --backend $BACKEND -q -f -o "$WORK/cube.fzm"
  "$FZ" compress "$WORK/cube.f32" --dtype f32 --shape ${N}x${N}x${N} --stream --backend $BACKEND -q -f -o "$WORK/cube-s.fzm"
  # Wall time in ms (bash's clock; /usr/bin/time only resolves 10 ms), peak RSS separately.
  TIMEFORMAT=%3R
  for a in cube.fzm cube-s.fzm; do
    "$FZ" inspect "$WORK/$a" | grep -E "^(format|size|chunks)" | sed "s/^/    $a: /"
    for i in 1 2 3 4 5; do
      t=$({ time "$FZ" decompress "$WORK/$a" -o /dev/null --backend $BACKEND -q; } 2>&1)
      echo "    $a full decode $t s"
    done
    /usr/bin/time -f "    $a full decode peak RSS %M KiB" "$FZ" decompress "$WORK/$a" -o /dev/null --backend $BACKEND -q
    # Inside 2x2x1 chunks, straddling 2x2x2, straddling 3x3x2 (the worst a 110^3 box meets).
    for box in 10:120,10:120,10:120 200:310,200:310,200:310 60:170,60:170,60:170; do
      "$FZ" decompress "$WORK/$a" -o /dev/null --backend $BACKEND -q --region $box --report 2>&1 | grep -E "region" |
        sed 's/^\s*/    /'
      for i in 1 2 3 4 5; do
        t=$({ time "$FZ" decompress "$WORK/$a" -o /dev/null --backend $BACKEND -q --region $box; } 2>&1)
        echo "    $a region $box $t s"
      done
      /usr/bin/time -f "    $a region $box peak RSS %M KiB" "$FZ" decompress "$WORK/$a" -o /dev/null --backend $BACKEND -q \
        --region $box
    done
  done
  rm -f "$WORK/cube.f32" "$WORK/cube.fzm" "$WORK/cube-s.fzm"
fi

if [[ $part == ratio || $part == all ]]; then
  # CHUNK=64x128x128 etc. for another shape than the default (it must suit every field then).
  CHUNK=${CHUNK:-auto}
  echo "== chunked (--chunk $CHUNK) vs unchunked ratio, rel 1e-3"
  "$PY" scripts/stream_field.py gen 512 512 512 >"$WORK/cube_512x512x512.f32"
  printf "    %-16s %-34s %-22s %10s %10s %8s\n" preset field chunks unchunked chunked chunked/unchunked
  for field in $DATA/etopo5_2161x4320.f32:2161x4320 $DATA/trinidad_dem_1201x2401.f32:1201x2401 \
    $DATA/navy_uwnd_132x73x144.f32:132x73x144 $WORK/cube_512x512x512.f32:512x512x512; do
    f=${field%%:*}; s=${field##*:}
    for p in $("$FZ" presets | awk '{print $1}'); do
      args=("$f" --dtype f32 --shape "$s" --preset "$p" --backend cpu -q -f)
      if "$FZ" compress "${args[@]}" -o "$WORK/u.fzm" 2>/dev/null &&
        "$FZ" compress "${args[@]}" --chunk "$CHUNK" -o "$WORK/c.fzm" 2>/dev/null; then
        u=$(stat -c %s "$WORK/u.fzm"); c=$(stat -c %s "$WORK/c.fzm"); n=$(stat -c %s "$f")
        g=$("$FZ" inspect "$WORK/c.fzm" | awk '/^chunks/{print $2 " of " $4}')
        printf "    %-16s %-34s %-22s %10.3f %10.3f %8.4f\n" "$p" "$(basename "$f")" "$g" "$(echo "$n/$u" | bc -l)" \
          "$(echo "$n/$c" | bc -l)" "$(echo "$u/$c" | bc -l)"
      else
        printf "    %-16s %-34s refused\n" "$p" "$(basename "$f")"
      fi
    done
  done
  rm -f "$WORK/cube_512x512x512.f32" "$WORK/u.fzm" "$WORK/c.fzm"
fi
