#!/usr/bin/env bash
# The native GPU compressors beside fzmod, in one device call (issue 12): builds PFPL, FZ-GPU
# and cuSZp 3.0 from the public sources that scripts/prepare-natives.sh staged into
# .gpu/natives/, for this GPU's own sm, in /tmp and in parallel; runs each with its own CLI and
# its own timing on etopo5 ×8 and etopo5 2-D; runs `fzmod bench` (.gpu/fzmod, from
# scripts/prepare-gpu.sh) for the matching presets; and prints ONE markdown table last
# (scripts/natives.py parses the tools' outputs; its header says what each prints and how
# its numbers become GB/s = 1e9 B/s). With $OUT set, also $OUT/natives.md and the logs.
#
#   here:    bash scripts/prepare-gpu.sh && bash scripts/prepare-natives.sh
#   device:  carry [".gpu"], command `OUT=$OUT bash scripts/natives.sh`   (~5-8 min on an H100)
#   here:    NATIVES_DRY=1 bash scripts/natives.sh   (no GPU: checks the staging, the build
#            commands and the parsing against canned outputs of the tools' printf formats)
#
# A native that fails to build or run is reported (log tail) and its row says so; the rest
# goes on. Exit status: 0 when every cell of the table holds a number, 1 otherwise. Knobs (environment):
#   NATIVES_REPS (3)  processes per FZ-GPU and cuSZp case (each process times one call; the
#                     median is reported; PFPL times 9 calls in one process)
#   FZMOD_RUNS (10)   fzmod bench --runs
#   NATIVES_BUILD_DEADLINE (300)  seconds from start after which builds are stopped
#   NATIVES_DEADLINE (480)  seconds from start after which no further case starts
#   NATIVES_WORK (/tmp/natives), NATIVES_SRC (.gpu/natives), FZMOD_BIN (.gpu/fzmod)
#   NATIVES_DRY_FAIL  (dry mode) comma-separated natives whose build is made to fail
#   NATIVES_DRY_GARBLE (dry mode) pfpl-comp, pfpl-decomp, fzgpu, cuszp or fzmod: that canned
#                     output loses its last line, to see a parse failure reported
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
SRC=${NATIVES_SRC:-$REPO/.gpu/natives}
WORK=${NATIVES_WORK:-/tmp/natives}
DRY=${NATIVES_DRY:-0}
REPS=${NATIVES_REPS:-3}
FZRUNS=${FZMOD_RUNS:-10}
FZMOD=${FZMOD_BIN:-$REPO/.gpu/fzmod}
JOBS=$(nproc 2>/dev/null || echo 8)
BUILD_DEADLINE=${NATIVES_BUILD_DEADLINE:-300}
DEADLINE=${NATIVES_DEADLINE:-480}
RUN_TIMEOUT=${NATIVES_RUN_TIMEOUT:-120}
PY=(python3 "$REPO/scripts/natives.py")
START=$(date +%s)
BUILD_END=$((START + BUILD_DEADLINE))
say() { printf '[natives %3ds] %s\n' $(($(date +%s) - START)) "$*"; }
late() { [ $(($(date +%s) - START)) -ge "$DEADLINE" ]; }
for n in REPS FZRUNS BUILD_DEADLINE DEADLINE RUN_TIMEOUT; do
  [[ ${!n} =~ ^[1-9][0-9]*$ ]] || { echo "natives.sh: $n must be a positive integer, not '${!n}'"; exit 2; }
done
command -v python3 >/dev/null || { echo "natives.sh: python3 is required"; exit 2; }
case "$WORK" in /tmp/*) ;; *) echo "natives.sh: NATIVES_WORK must lie under /tmp (it is emptied)"; exit 2 ;; esac
rm -rf "$WORK"
mkdir -p "$WORK/build" "$WORK/cases" "$WORK/run"
: > "$WORK/cases.list"

if [ "$DRY" = 1 ]; then
  say "dry mode: parser self-test"
  "${PY[@]}" selftest || { echo "natives.sh: the parser self-test failed"; exit 1; }
  SM=90
else
  command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
  command -v nvcc >/dev/null || echo "WARNING: nvcc not found (PATH, /usr/local/cuda/bin): no native can be built"
  SM=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .\r')
  if ! [[ $SM =~ ^[0-9]{2,3}$ ]]; then
    echo "WARNING: nvidia-smi gave compute capability '$SM': building for sm_90"
    SM=90
  fi
fi
say "building for sm_$SM with $JOBS cores (build deadline ${BUILD_DEADLINE}s, run deadline ${DEADLINE}s)"

# ---------------------------------------------------------------- builds
# build_step LOG CMD...: one build command, logged, stopped at the build deadline. In dry mode
# only logged (and failed for the natives in NATIVES_DRY_FAIL).
build_step() {
  local log=$1
  shift
  echo "+$(printf ' %q' "$@")" >> "$log"
  if [ "$DRY" = 1 ]; then
    if [[ ",${NATIVES_DRY_FAIL:-}," == *",$CUR,"* ]]; then
      echo "error: build failure injected by NATIVES_DRY_FAIL" >> "$log"
      return 1
    fi
    return 0
  fi
  local left=$((BUILD_END - $(date +%s)))
  if [ "$left" -le 0 ]; then
    echo "build deadline (${BUILD_DEADLINE}s) reached: not run" >> "$log"
    return 124
  fi
  timeout "$left" "$@" >> "$log" 2>&1
  local rc=$?
  [ $rc -eq 124 ] && echo "stopped at the build deadline (${BUILD_DEADLINE}s)" >> "$log"
  return $rc
}

# dry_stub PATH TOOL: in dry mode, a stand-in executable printing natives.py's canned output.
dry_stub() {
  mkdir -p "$(dirname "$1")"
  printf '#!/usr/bin/env bash\nexec python3 %q sample %q "$@"%s\n' "$REPO/scripts/natives.py" "$2" "$3" > "$1"
  chmod +x "$1"
}

# Each build_* runs in the background; it leaves WORK/build/NAME.bin (the binaries, one a line)
# or WORK/build/NAME.failed (why), and its commands and their output in WORK/build/NAME*.log.
finish_build() { # NAME BINARY...
  local name=$1 b
  shift
  for b in "$@"; do
    [ -x "$b" ] || { echo "$b was not produced" > "$WORK/build/$name.failed"; return 1; }
  done
  printf '%s\n' "$@" > "$WORK/build/$name.bin"
}

# PFPL: its makefile's nvcc line for the two f32 NOA (value-range-relative) binaries, with
# NV_SM set to this device (the line carries -fmad=false and the host flags).
build_pfpl() {
  CUR=pfpl
  local dir=$WORK/build/pfpl log=$WORK/build/pfpl.log name file line pids=() rc=0
  cp -r "$SRC/pfpl" "$dir" && cd "$dir" && mkdir -p bin/f32/gpu || { echo "cannot copy the sources" > "$WORK/build/pfpl.failed"; return; }
  local plain='^nvcc [-A-Za-z0-9_=./" ]+$'
  for name in compress decompress; do
    file=src/f32_noa_${name%ress}_gpu.cu # comp / decomp
    line=$(grep -E "^[[:space:]]*nvcc .* -o bin/f32/gpu/f32_noa_${name}_cuda " makefile 2>/dev/null | head -1 |
      sed -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' -e "s/\$(NV_SM)/$SM/g")
    if ! [[ $line =~ $plain ]]; then
      echo "note: no plain nvcc line for f32_noa_${name}_cuda in the makefile ('$line'): using the known one" >> "$log"
      line="nvcc -O3 -arch=sm_$SM -fmad=false -Xcompiler \"-O3 -march=native -fopenmp -mno-fma -ffp-contract=off\" -I./src/ -o bin/f32/gpu/f32_noa_${name}_cuda $file"
    fi
    [[ $line == *-fmad=false* ]] || line="$line -fmad=false"
    local cmd
    eval "cmd=($line)" # checked above: words, flags, paths and double quotes only
    build_step "$log.$name" "${cmd[@]}" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  cat "$log.compress" "$log.decompress" >> "$log" 2>/dev/null
  [ "$DRY" = 1 ] && [ $rc -eq 0 ] && {
    dry_stub "$dir/bin/f32/gpu/f32_noa_compress_cuda" pfpl-comp ""
    dry_stub "$dir/bin/f32/gpu/f32_noa_decompress_cuda" pfpl-decomp ' "$NATIVES_DRY_ORIG"'
  }
  [ $rc -eq 0 ] || { echo "nvcc failed" > "$WORK/build/pfpl.failed"; return; }
  finish_build pfpl "$dir/bin/f32/gpu/f32_noa_compress_cuda" "$dir/bin/f32/gpu/f32_noa_decompress_cuda"
}

# FZ-GPU: its Makefile's two nvcc steps (claunch_cuda.cu to an object, then fz.cu linked with
# it) with -O3 -arch=sm_XX --extended-lambda -Iinclude. fz.cu uses nothing of claunch_cuda.o,
# so when that object fails or is late, fz-gpu is linked from fz.cu alone (and says so).
build_fzgpu() {
  CUR=fzgpu
  local dir=$WORK/build/fzgpu log=$WORK/build/fzgpu.log
  cp -r "$SRC/fzgpu" "$dir" && cd "$dir" || { echo "cannot copy the sources" > "$WORK/build/fzgpu.failed"; return; }
  local flags=(-O3 -arch=sm_$SM --extended-lambda -Iinclude)
  build_step "$log.claunch" nvcc "${flags[@]}" -c src/claunch_cuda.cu -o claunch_cuda.o &
  local p_claunch=$!
  if ! build_step "$log.fz" nvcc "${flags[@]}" -c src/fz.cu -o fz.o; then
    kill "$p_claunch" 2>/dev/null
    cat "$log.fz" >> "$log"
    echo "nvcc failed on src/fz.cu" > "$WORK/build/fzgpu.failed"
    return
  fi
  if wait "$p_claunch"; then
    cat "$log.fz" "$log.claunch" >> "$log"
    BUILD_END=$((BUILD_END + 60)) build_step "$log" nvcc "${flags[@]}" fz.o claunch_cuda.o -o fz-gpu
  else
    cat "$log.fz" "$log.claunch" >> "$log"
    echo "note: claunch_cuda.cu did not build; linking fz-gpu from fz.cu alone (it calls nothing of it)" | tee "$dir/NOTE" >> "$log"
    BUILD_END=$((BUILD_END + 60)) build_step "$log" nvcc "${flags[@]}" fz.o -o fz-gpu
  fi
  [ "$DRY" = 1 ] && dry_stub "$dir/fz-gpu" fzgpu ""
  finish_build fzgpu "$dir/fz-gpu"
}

# cuSZp: its CMake (Release), target cuSZp (examples/cuSZp.cpp), architectures set to this
# device's sm. Its CMakeLists pins them with a plain set() (60 61 62 70 75 80 86, which CUDA 13
# no longer supports) that a -D cannot override, so the build copy's line is edited. Without
# CMake >= 3.21, or when it fails, a direct nvcc build of the same sources (-rdc, as CMake's
# separable compilation).
build_cuszp() {
  CUR=cuszp
  local dir=$WORK/build/cuszp log=$WORK/build/cuszp.log bin=
  cp -r "$SRC/cuszp" "$dir" && cd "$dir" || { echo "cannot copy the sources" > "$WORK/build/cuszp.failed"; return; }
  sed -i -E "s/^([[:space:]]*set\(CMAKE_CUDA_ARCHITECTURES)[^)]*\)/\1 $SM)/" CMakeLists.txt
  grep -n "CMAKE_CUDA_ARCHITECTURES" CMakeLists.txt >> "$log"
  local cm
  cm=$(cmake --version 2>/dev/null | head -1 | grep -oE '[0-9]+\.[0-9]+(\.[0-9]+)?' || true)
  if [ "$DRY" = 1 ] || { [ -n "$cm" ] && [ "$(printf '3.21\n%s\n' "$cm" | sort -V | head -1)" = 3.21 ]; }; then
    echo "cmake $cm" >> "$log"
    if build_step "$log" cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$SM" \
        -DCMAKE_CUDA_COMPILER="$(command -v nvcc || echo nvcc)" -DcuSZp_BUILD_EXAMPLES=ON &&
      build_step "$log" cmake --build build -j "$JOBS" --target cuSZp; then
      bin=$dir/build/examples/bin/cuSZp
      [ "$DRY" = 1 ] && dry_stub "$bin" cuszp ""
      [ -x "$bin" ] || { echo "CMake built no $bin" >> "$log"; bin=; }
    fi
  else
    echo "no CMake >= 3.21 (found '${cm:-none}'): direct nvcc build" >> "$log"
  fi
  if [ -z "$bin" ] && [ "$(date +%s)" -lt "$BUILD_END" ] && [ "$DRY" != 1 ]; then
    echo "== direct nvcc build" >> "$log"
    mkdir -p obj
    local f pids=() rc=0 flags=(-O3 -DNDEBUG -std=c++17 -arch=sm_$SM -rdc=true -Xcompiler -Wno-unused-result -Iinclude -Iinclude/cuSZp -Isrc)
    for f in src/*.cu examples/cuSZp.cpp; do
      build_step "$log.$(basename "$f")" nvcc "${flags[@]}" -x cu -c "$f" -o "obj/$(basename "$f").o" &
      pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || rc=1; done
    cat "$log".*.cu "$log".*.cpp >> "$log" 2>/dev/null
    [ $rc -eq 0 ] && BUILD_END=$((BUILD_END + 60)) build_step "$log" nvcc -arch=sm_$SM -rdc=true obj/*.o -o cuSZp && bin=$dir/cuSZp
  fi
  [ -n "$bin" ] || { echo "CMake and nvcc builds failed" > "$WORK/build/cuszp.failed"; return; }
  finish_build cuszp "$bin"
}

# Staging check: the sources natives.sh needs, and which commits they are.
declare -A HAVE
for spec in pfpl:makefile:src/f32_noa_comp_gpu.cu:src/f32_noa_decomp_gpu.cu fzgpu:src/fz.cu:src/claunch_cuda.cu:include/kernel/lorenzo_var.cuh \
  cuszp:CMakeLists.txt:examples/cuSZp.cpp:src/cuSZp_entry_1D_f32.cu:include/cuSZp.h; do
  IFS=: read -r name files <<< "$spec"
  HAVE[$name]=1
  for f in ${files//:/ }; do
    if [ ! -f "$SRC/$name/$f" ]; then
      echo "$name: $SRC/$name/$f is missing (run scripts/prepare-natives.sh here): skipped" | tee "$WORK/build/$name.failed"
      HAVE[$name]=0
      break
    fi
  done
done
if [ -f "$SRC/COMMITS" ]; then
  say "staged sources:"
  sed 's/^/    /' "$SRC/COMMITS"
else
  echo "WARNING: no $SRC/COMMITS (run scripts/prepare-natives.sh here)"
fi

say "building (logs in $WORK/build)"
build_pids=()
for name in pfpl fzgpu cuszp; do
  if [ "${HAVE[$name]}" = 1 ]; then
    (build_$name) > /dev/null 2>&1 &
    build_pids+=($!)
  fi
done

# ---------------------------------------------------------------- data (while the builds run)
if [ "$DRY" = 1 ]; then
  mkdir -p "$WORK/data"
  E=$WORK/data/etopo5_small.f32
  E8=$WORK/data/etopo5x8_small.f32
  python3 - "$E" "$E8" <<'PY'
import array, math, sys
a = array.array("f", (1000 * math.sin(i / 97) + 10 * (i % 13) for i in range(4320 * 16)))
open(sys.argv[1], "wb").write(a.tobytes())
open(sys.argv[2], "wb").write(a.tobytes() * 8)
PY
  dry_stub "$WORK/dry-bin/fzmod" fzmod ""
  FZMOD=$WORK/dry-bin/fzmod
else
  E=/tmp/fzdata/etopo5_2161x4320.f32
  E8=/tmp/etopo5x8_74684160.f32
  mkdir -p /tmp/fzdata
  if [ "$(stat -c %s "$E" 2>/dev/null)" != 37342080 ]; then
    if [ -f .gpu/data/etopo5_2161x4320.f32.xz ]; then
      python3 -c 'import lzma, sys; open(sys.argv[2], "wb").write(lzma.decompress(open(sys.argv[1], "rb").read()))' \
        .gpu/data/etopo5_2161x4320.f32.xz "$E" || echo "ERROR: cannot decompress .gpu/data/etopo5_2161x4320.f32.xz"
    else
      echo "ERROR: no .gpu/data/etopo5_2161x4320.f32.xz (run scripts/prepare-gpu.sh here)"
    fi
  fi
  if [ "$(stat -c %s "$E" 2>/dev/null)" = 37342080 ] && [ "$(stat -c %s "$E8" 2>/dev/null)" != 298736640 ]; then
    python3 -c 'import sys; e = open(sys.argv[1], "rb").read(); open(sys.argv[2], "wb").write(e * 8)' "$E" "$E8"
  fi
fi
for f in "$E" "$E8"; do
  [ -s "$f" ] || { echo "natives.sh: no input $f: nothing to measure"; kill ${build_pids[@]+"${build_pids[@]}"} 2>/dev/null; exit 1; }
done
RANGE=$("${PY[@]}" range "$E")
say "inputs: $E ($(stat -c %s "$E") B), $E8 ($(stat -c %s "$E8") B), value range $RANGE"
if [ ! -x "$FZMOD" ]; then
  echo "ERROR: no executable $FZMOD (run scripts/prepare-gpu.sh here): the fzmod columns will fail"
fi

for p in ${build_pids[@]+"${build_pids[@]}"}; do wait "$p"; done
declare -A BIN
for name in pfpl fzgpu cuszp; do
  if [ -f "$WORK/build/$name.bin" ]; then
    BIN[$name]=$(paste -sd' ' "$WORK/build/$name.bin")
    say "$name built$( [ -f "$WORK/build/$name/NOTE" ] && echo " ($(cat "$WORK/build/$name/NOTE"))")"
  else
    BIN[$name]=
    why=$(cat "$WORK/build/$name.failed" 2>/dev/null || echo "no result")
    say "$name NOT built: $why"
    [ -f "$WORK/build/$name.log" ] && tail -n 25 "$WORK/build/$name.log" | sed 's/^/    | /'
  fi
done

# ---------------------------------------------------------------- runs
# run_step CASE STEP CMD...: one run, its output in CASE/STEP.log and exit status in STEP.rc.
run_step() {
  local d=$WORK/cases/$1 step=$2
  shift 2
  (cd "$WORK/run" && timeout "$RUN_TIMEOUT" "$@") > "$d/$step.log" 2>&1
  local rc=$?
  echo $rc > "$d/$step.rc"
  [ $rc -eq 0 ] || say "  $1 $step exited $rc$( [ $rc -eq 124 ] && echo " (timed out after ${RUN_TIMEOUT}s)")"
  return $rc
}

# one_case ID NATIVE LABEL PRESET FILE SHAPE BOUND-MODE BOUND NATIVE-ARGS...
one_case() {
  local id=$1 native=$2 label=$3 preset=$4 file=$5 shape=$6 mode=$7 eb=$8
  shift 8
  local d=$WORK/cases/$id
  mkdir -p "$d"
  echo "$id" >> "$WORK/cases.list"
  local bound=$eb
  [ "$mode" = rel ] && bound=$(python3 -c "print($eb * $RANGE)")
  printf 'native=%s\nlabel=%s\npreset=%s\nfzmod_args=%s\nbound=%s\n' "$native" "$label" "$preset" \
    "--shape $shape -m $mode -e $eb --runs $FZRUNS" "$bound" > "$d/meta"
  if late; then
    echo "skipped: the run deadline (${DEADLINE}s) was reached" > "$d/skip"
    say "$id: skipped (deadline)"
    return
  fi
  export NATIVES_DRY_ORIG=$file
  local bins=(${BIN[$native]}) rec=$WORK/run/$id.rec
  if [ ${#bins[@]} -eq 0 ]; then
    echo "not built: $(cat "$WORK/build/$native.failed" 2>/dev/null)" > "$d/skip"
  else
    case $native in
      pfpl)
        run_step "$id" comp "${bins[0]}" "$file" "$WORK/run/$id.pfpl" "$eb" &&
          run_step "$id" decomp "${bins[1]}" "$WORK/run/$id.pfpl" "$rec" &&
          "${PY[@]}" maxerr "$file" "$rec" "$bound" > "$d/check.txt" 2>&1
        ;;
      fzgpu)
        for i in $(seq 1 "$REPS"); do
          { [ "$i" -gt 1 ] && late; } && break
          run_step "$id" "rep$i" "${bins[0]}" "$file" "$@" "$eb"
        done
        ;;
      cuszp)
        for i in $(seq 1 "$REPS"); do
          { [ "$i" -gt 1 ] && late; } && break
          local extra=()
          [ "$i" = 1 ] && extra=(-o "$rec")
          # cuSZp -m is its encoding mode (plain, outlier, fixed); -eb takes the bound's mode.
          run_step "$id" "rep$i" "${bins[0]}" -i "$file" -t f32 -m "$1" -d 1 -eb "$mode" "$eb" ${extra[@]+"${extra[@]}"} &&
            [ "$i" = 1 ] && "${PY[@]}" maxerr "$file" "$rec" "$eb" > "$d/check.txt" 2>&1
        done
        ;;
    esac
    rm -f "$WORK/run/$id".*
  fi
  run_step "$id" fzmod "$FZMOD" bench "$file" --dtype f32 --shape "$shape" --preset "$preset" -m "$mode" -e "$eb" \
    --backend cuda --runs "$FZRUNS" --fusion on --json "$d/fzmod.json"
  say "$id done"
}

say "running"
one_case pfpl-x8-1e-3 pfpl "PFPL, etopo5 ×8 (1-D), rel 1e-3" pfpl "$E8" 74684160 rel 1e-3
one_case pfpl-x8-1e-4 pfpl "PFPL, etopo5 ×8 (1-D), rel 1e-4" pfpl "$E8" 74684160 rel 1e-4
one_case pfpl-2d-1e-3 pfpl "PFPL, etopo5 2161×4320, rel 1e-3" pfpl "$E" 2161x4320 rel 1e-3
# fz-gpu F X Y Z E, X the fastest dimension.
one_case fzgpu-x8-1e-3 fzgpu "FZ-GPU, etopo5 ×8 as 17288×4320, rel 1e-3" fzgpu "$E8" 17288x4320 rel 1e-3 4320 17288 1
one_case fzgpu-x8-1e-4 fzgpu "FZ-GPU, etopo5 ×8 as 17288×4320, rel 1e-4" fzgpu "$E8" 17288x4320 rel 1e-4 4320 17288 1
one_case fzgpu-2d-1e-3 fzgpu "FZ-GPU, etopo5 2161×4320, rel 1e-3" fzgpu "$E" 2161x4320 rel 1e-3 4320 2161 1
# cuSZp 1-D with the absolute bound rel 1e-3 × range (18209) = 18.209, as gpu-check.sh's -abs rows.
one_case cuszp-plain cuszp "cuSZp 3.0 plain, etopo5 ×8 (1-D), abs 18.209" cuszp "$E8" 74684160 abs 18.209 plain
one_case cuszp-outlier cuszp "cuSZp 3.0 outlier, etopo5 ×8 (1-D), abs 18.209" cuszp2 "$E8" 74684160 abs 18.209 outlier
one_case cuszp-fixed cuszp "cuSZp 3.0 fixed, etopo5 ×8 (1-D), abs 18.209" cuszp3-fixed "$E8" 74684160 abs 18.209 fixed

# ---------------------------------------------------------------- report
{
  echo "# Natives beside fzmod ($(date -u +%Y-%m-%d), natives.sh)"
  echo
  if [ "$DRY" = 1 ]; then
    echo "DRY RUN: canned outputs, not measurements."
  else
    echo "GPU: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1), sm_$SM;" \
      "$(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*' | head -1); cmake $(cmake --version 2>/dev/null | head -1 | grep -oE '[0-9.]+$' || echo none)"
  fi
  echo
  echo "Sources (built at run time from their public repositories, never vendored):"
  sed 's/^/- /' "$SRC/COMMITS" 2>/dev/null
  for name in pfpl fzgpu cuszp; do
    [ -n "${BIN[$name]}" ] || echo "- $name: NOT built ($(cat "$WORK/build/$name.failed" 2>/dev/null))"
    [ -f "$WORK/build/$name/NOTE" ] && echo "- $name: $(cat "$WORK/build/$name/NOTE")"
  done
  echo "- fzmod: $("$FZMOD" --version 2>/dev/null | head -1)"
} > "$WORK/header.md"
md=()
[ -n "${OUT:-}" ] && mkdir -p "$OUT" && md=(--md "$OUT/natives.md")
"${PY[@]}" report "$WORK" ${md[@]+"${md[@]}"}
rc=$?
if [ -n "${OUT:-}" ]; then
  (cd "$WORK" && tar -czf "$OUT/natives-logs.tar.gz" cases build/*.log build/*.failed build/*.bin header.md 2>/dev/null)
fi
exit $rc
