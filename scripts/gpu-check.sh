#!/usr/bin/env bash
# Everything that needs the GPU, in one run (prepared by scripts/prepare-gpu.sh):
#   1. the GPU tests (#[ignore]d elsewhere, run here with --include-ignored): random pipelines
#      and each stage alone, fused == unfused == CPU bytes; every preset x shared field x bound
#      with the bound on every element; cross decoding; corrupt archives; NVRTC compiles all;
#   2. the benchmark table of docs/PERFORMANCE.md (fzmod bench, CUDA events, medians), fused
#      and unfused (--fusion off);
#   3. the Python wheel's device paths (crates/fzmod-python/tests/gpu_check.py), when
#      prepare-gpu.sh built a wheel into .gpu/wheels;
# and prints a short summary last. Full logs and JSON go to $OUT when set.
# The whole run takes longer than one device call allows: run it as calls of `--tests-only`
# (GPU tests and Python: nine test processes at once, the seeded random tests in four shards;
# one process took 9–11 minutes on the H200 before the programs were compiled on all cores —
# GPU_TESTS=NAME-or-`--skip NAME` still runs a selection in one process, and FZMOD_GPU_SHARD=k/n
# a shard of the seeded tests' seeds), `--sanitize-only` (about 4–6) and `--bench-only` (about
# 1.5). Each test process's log is appended to $OUT/gpu-tests.log when it ends, so a call that
# runs out of time still brings back the results of the processes that finished.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/fzmod-gpu}
mkdir -p "$out" /tmp/fzdata /tmp/bench
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
python3 - <<'PY'
import lzma, pathlib
for f in pathlib.Path(".gpu/data").glob("*.xz"):
    pathlib.Path("/tmp/fzdata", f.stem).write_bytes(lzma.decompress(f.read_bytes()))
PY
E8=$(DATA=/tmp/fzdata bash scripts/etopo5x8.sh)
export FZMOD_DATA=/tmp/fzdata FZMOD_REPO=$PWD
MODE=${1:-}
# Whether this run includes a part: tests, sanitize or bench.
part() { [ -z "$MODE" ] || [ "$MODE" = "--$1-only" ]; }
tests_rc=0
part tests && rm -f "$out"/gpu-tests*.log
if part tests && [ -n "${GPU_TESTS:-}" ]; then
  # GPU_TESTS: test-name filters or `--skip NAME`: those tests, in one process.
  ./.gpu/gpu-tests --include-ignored --test-threads 1 --nocapture ${GPU_TESTS:-} 2>&1 | tee "$out/gpu-tests.log" | grep -E "^test |GPU ==|panicked|skipping|result"
  tests_rc=${PIPESTATUS[0]}
elif part tests; then
  # Nine processes share the GPU (the tests wait on NVRTC compiles and their CPU references,
  # and the host has the cores): the presets × shared fields test in three groups of presets
  # (FZMOD_GPU_PRESETS, round robin so that the slow interpolation presets part), the seeded
  # random tests in four shards of their seeds (FZMOD_GPU_SHARD), two long tests in the eighth
  # and every other test in the ninth. Each writes its log as it goes; a finished one is
  # appended to $OUT/gpu-tests.log, so a call that runs out of time still brings back the
  # tests that finished.
  mapfile -t presets < <(./.gpu/fzmod presets | awk '{print $1}')
  groups=("" "" "")
  for i in "${!presets[@]}"; do groups[i % 3]+="${groups[i % 3]:+,}${presets[i]}"; done
  seeded=(random_pipelines_give_cpu_bytes_fused_and_unfused random_fused_regions_give_cpu_bytes
    fzgpu_and_pfpl_integer_stages_alone_give_cpu_bytes fzgpu_and_pfpl_float_stages_and_presets_give_cpu_bytes
    masked_pipelines_give_cpu_bytes huffman_alone_gives_cpu_bytes)
  logs=/tmp/gpu-test-logs
  rm -rf "$logs" && mkdir -p "$logs"
  tests=(./.gpu/gpu-tests --include-ignored --test-threads 1 --nocapture)
  run_logged() { # log-name command...: run, then append the log to $OUT/gpu-tests.log
    "${@:2}" > "$logs/$1.log" 2>&1
    local rc=$?
    if command -v flock >/dev/null; then
      flock "$out/gpu-tests.log" cat "$logs/$1.log" >> "$out/gpu-tests.log"
    else
      cat "$logs/$1.log" >> "$out/gpu-tests.log"
    fi
    return $rc
  }
  pids=()
  for g in 0 1 2; do
    FZMOD_GPU_PRESETS=${groups[g]} run_logged "presets-$g" "${tests[@]}" presets_on_shared_fields &
    pids+=($!)
  done
  for k in 0 1 2 3; do
    FZMOD_GPU_SHARD=$k/4 run_logged "seeded-$k" "${tests[@]}" --exact "${seeded[@]}" &
    pids+=($!)
  done
  # Two long tests apart from the rest, which ran past 400 s as one process on a fresh H200
  # (2026-12-03: its NVRTC compiles not shared), where a seeded shard takes about 180 s.
  long=(repeated_calls_replay_graphs_with_cpu_bytes gatherers_in_regions_give_cpu_bytes)
  run_logged long "${tests[@]}" --exact "${long[@]}" &
  pids+=($!)
  skips=(--skip presets_on_shared_fields)
  for t in "${seeded[@]}" "${long[@]}"; do skips+=(--skip "$t"); done
  run_logged rest "${tests[@]}" "${skips[@]}" &
  pids+=($!)
  for pid in "${pids[@]}"; do wait "$pid" || tests_rc=1; done
  grep -E "^test |GPU ==|FZMOD_GPU_PRESETS|panicked|skipping|result" "$out/gpu-tests.log"
fi

# compute-sanitizer: memcheck, racecheck and initcheck over the small GPU tests and a CLI round
# trip of every preset, fused and unfused (the big property tests ran above, unsanitized).
sanitize_rc=0
if part sanitize; then
  N=data/navy_uwnd_132x73x144.f32
  for tool in memcheck racecheck initcheck; do
    san="compute-sanitizer --tool $tool --error-exitcode 9 --print-limit 5"
    timeout 450 $san ./.gpu/gpu-tests --include-ignored --test-threads 1 integer_stages_alone embedding_api gatherers_in_regions global_inverses_store adaptive_bitpack_in_regions \
      > "/tmp/san-$tool-tests.log" 2>&1 || { echo "sanitizer $tool: GPU tests FAILED"; sanitize_rc=1; }
    for preset in cuszp cuszp2 cuszp3-fixed cuszp3-plain cuszp3-outlier fzgpu pfpl cusz mans interp interp-fast; do
      # cusz, mans and the interpolation presets have no fusion rule or region: one path (on
      # navy's 3-D grid the interpolation runs pass by pass; the 2-D boxes follow below).
      fusions="on off"
      [[ $preset == cusz || $preset == mans || $preset == interp* ]] && fusions=on
      for fusion in $fusions; do
        timeout 120 $san ./.gpu/fzmod roundtrip $N --dtype f32 --shape 132x73x144 --preset $preset -m rel -e 1e-3 \
          --backend cuda --fusion $fusion --quiet > "/tmp/san-$tool-$preset-$fusion.log" 2>&1 \
          || { echo "sanitizer $tool: $preset fusion $fusion FAILED"; tail -5 "/tmp/san-$tool-$preset-$fusion.log"; sanitize_rc=1; }
      done
    done
    # Repeated calls replay the cuSZp rule's launch lists as CUDA graphs (the bench's timed
    # runs); levitus' −1e10 land and NaN through the Mask stage's tile kernels.
    timeout 120 $san ./.gpu/fzmod bench $N --dtype f32 --shape 132x73x144 --preset cuszp2 --backend cuda --runs 3 \
      > "/tmp/san-$tool-graphs.log" 2>&1 || { echo "sanitizer $tool: graph replay FAILED"; sanitize_rc=1; }
    timeout 120 $san ./.gpu/fzmod roundtrip /tmp/fzdata/levitus_temp_20x180x360.f32 --dtype f32 --shape 20x180x360 \
      --preset interp --fill-value -1e10 -m rel -e 1e-3 --backend cuda --quiet > "/tmp/san-$tool-mask.log" 2>&1 \
      || { echo "sanitizer $tool: masked interp FAILED"; sanitize_rc=1; }
    timeout 120 $san ./.gpu/fzmod roundtrip /tmp/fzdata/trinidad_dem_1201x2401.f32 --dtype f32 --shape 1201x2401 \
      --preset interp-fast -m rel -e 1e-4 --backend cuda --quiet > "/tmp/san-$tool-boxes.log" 2>&1 \
      || { echo "sanitizer $tool: interpolation boxes FAILED"; sanitize_rc=1; }
    echo "sanitizer $tool: $(grep -hE "(ERROR|RACECHECK) SUMMARY" /tmp/san-$tool-*.log | sort | uniq -c | tr -s ' ' | paste -sd';')"
  done
fi

bench() { # name file dtype shape preset-or-toml bound [mode [fusion]]
  part bench || return 0
  local pipeline=(--preset "$5")
  [[ "$5" == *.toml ]] && pipeline=(--config "$5")
  ./.gpu/fzmod bench "$2" --dtype "$3" --shape "$4" "${pipeline[@]}" -m "${7:-rel}" -e "$6" --backend cuda --runs 20 \
    --fusion "${8:-on}" \
    --json "/tmp/bench/$1.json" > "/tmp/bench/$1.txt" 2>&1 || echo "bench $1 failed: $(tail -1 "/tmp/bench/$1.txt")"
}
E=/tmp/fzdata/etopo5_2161x4320.f32
bench x8-cuszp $E8 f32 74684160 cuszp 1e-3
bench x8-cuszp2 $E8 f32 74684160 cuszp2 1e-3
bench x8-cuszp3-fixed $E8 f32 74684160 cuszp3-fixed 1e-3
bench 2d-cuszp3-plain $E f32 2161x4320 cuszp3-plain 1e-3
bench 2d-cuszp3-outlier $E f32 2161x4320 cuszp3-outlier 1e-3
bench x8-cuszp2-1e-2 $E8 f32 74684160 cuszp2 1e-2
bench x8-cuszp2-1e-4 $E8 f32 74684160 cuszp2 1e-4
bench 2d-cuszp3-fixed $E f32 2161x4320 cuszp3-fixed 1e-3
bench trinidad-cuszp3-outlier /tmp/fzdata/trinidad_dem_1201x2401.f32 f32 1201x2401 cuszp3-outlier 1e-3
# The same bound given as an absolute value (rel 1e-3 x range 18209 of etopo5): no range pass,
# as native cuSZp, which receives its absolute bound from the host.
bench x8-cuszp-abs $E8 f32 74684160 cuszp 18.209 abs
bench x8-cuszp2-abs $E8 f32 74684160 cuszp2 18.209 abs
bench x8-cuszp3-fixed-abs $E8 f32 74684160 cuszp3-fixed 18.209 abs
bench f64-ncep-cuszp2 /tmp/fzdata/ncep_hgt500_djf_65x29x49.f64 f64 65x29x49 cuszp2 1e-3
# FZ-GPU and PFPL (PFPL as one generated region kernel each way).
bench 2d-fzgpu $E f32 2161x4320 fzgpu 1e-3
bench x8-2d-fzgpu $E8 f32 17288x4320 fzgpu 1e-3
bench 2d-pfpl $E f32 2161x4320 pfpl 1e-3
bench x8-pfpl $E8 f32 74684160 pfpl 1e-3
# The entropy-coded and interpolation presets.
for preset in cusz mans; do bench "x8-2d-$preset" $E8 f32 17288x4320 $preset 1e-3; done
for preset in interp interp-fast; do
  bench "2d-$preset" $E f32 2161x4320 $preset 1e-3
  bench "x8-2d-$preset" $E8 f32 17288x4320 $preset 1e-3
done
# Composed chains (scripts/chains/): the region compiler starts a region at a gatherer
# (N-D Lorenzo, TiledLorenzo: the Quantizer runs inside its loads), fuses what follows a stage
# without a fragment, and all of quant-negabinary-rze.
bench x8-chain-nd-lorenzo $E8 f32 74684160 scripts/chains/nd-lorenzo-zigzag-rze.toml 1e-3
bench x8-2d-chain-nd-lorenzo $E8 f32 17288x4320 scripts/chains/nd-lorenzo-zigzag-rze.toml 1e-3
bench x8-chain-tiled-negabinary $E8 f32 17288x4320 scripts/chains/tiled-negabinary-rze.toml 1e-3
bench x8-chain-block-lorenzo $E8 f32 74684160 scripts/chains/block-lorenzo-zigzag-rze.toml 1e-3
bench x8-chain-quant-negabinary $E8 f32 74684160 scripts/chains/quant-negabinary-rze.toml 1e-3
# The unfused device path: every stage's own kernels, same bytes.
for preset in cuszp cuszp2 cuszp3-fixed pfpl; do bench "x8-$preset-unfused" $E8 f32 74684160 $preset 1e-3 rel off; done
for preset in cuszp3-plain cuszp3-outlier; do bench "2d-$preset-unfused" $E f32 2161x4320 $preset 1e-3 rel off; done
for chain in nd-lorenzo-zigzag-rze quant-negabinary-rze; do
  bench "x8-chain-$chain-unfused" $E8 f32 74684160 scripts/chains/$chain.toml 1e-3 rel off
done
part bench && cat /tmp/bench/x8-cuszp2.txt

# The Python wheel on the GPU: CuPy and PyTorch arrays compressed on the device to the CPU
# backend's bytes, decoding into CuPy arrays, refusals, host vs device timing. Optional:
# prepare-gpu.sh builds the wheel only where maturin is installed. Needs numpy, CuPy, PyTorch.
python_rc=0
rm -f /tmp/gpu-python.log
if ! part tests; then
  :
elif compgen -G ".gpu/wheels/*.whl" >/dev/null; then
  echo "== Python wheel on the GPU ($(basename .gpu/wheels/*.whl))"
  rm -rf /tmp/fzpy
  { python3 -m pip install -q --no-index --no-deps --target /tmp/fzpy .gpu/wheels/*.whl &&
    PYTHONPATH=/tmp/fzpy python3 crates/fzmod-python/tests/gpu_check.py; } > /tmp/gpu-python.log 2>&1 || python_rc=1
  cat /tmp/gpu-python.log
  cp /tmp/gpu-python.log "$out/"
else
  echo "note: .gpu/wheels is empty (prepare-gpu.sh built no wheel): Python GPU checks skipped"
fi

echo
echo "== summary ($(cat "$out/gpu.txt"))"
grep -sE "GPU == CPU|test result" "$out/gpu-tests.log"
grep -s "^gpu_check:" /tmp/gpu-python.log
python3 - "$out" <<'PY'
import json, pathlib, sys
print(f"{'benchmark':<30}{'ratio':>8}{'comp GB/s':>11}{'decomp GB/s':>12}{'e2e c/d GB/s':>15}{'max err':>11}{'peak c/d GB':>13}{'c/(in+ar)':>10}")
rows = {}
for f in sorted(pathlib.Path("/tmp/bench").glob("*.json")):
    j = rows[f.stem] = json.loads(f.read_text())
    e2e = j.get("end_to_end_seconds") or {"compress": 0, "decompress": 0}
    size = {"f32": 4, "float32": 4, "f64": 8, "float64": 8}[j["dtype"]]
    n = 1
    for d in j["shape"].split("x"): n *= int(d)
    gbps = lambda s: n * size / s / 1e9 if s else 0
    e2e_txt = f"{gbps(e2e['compress']):.1f}/{gbps(e2e['decompress']):.1f}"
    # Compress peak against input + archive (issue 12 asks for at most 2x).
    peak = j.get("peak_device_bytes") or {"compress": 0, "decompress": 0}
    footprint = peak["compress"] / (n * size * (1 + 1 / j["ratio"]))
    peak_txt = f"{peak['compress'] / 1e9:.2f}/{peak['decompress'] / 1e9:.2f}"
    print(f"{f.stem:<30}{j['ratio']:>8.3f}{j['compress_gbps']['median']:>11.1f}{j['decompress_gbps']['median']:>12.1f}{e2e_txt:>15}{j['max_abs_error']:>11.3g}{peak_txt:>13}{footprint:>10.2f}")
pathlib.Path(sys.argv[1], "bench.json").write_text(json.dumps(rows, indent=1))
PY
[ $tests_rc -eq 0 ] && tests_rc=$sanitize_rc
[ $tests_rc -eq 0 ] && tests_rc=$python_rc
exit $tests_rc
