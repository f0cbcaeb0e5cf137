#!/usr/bin/env bash
# Same-bytes check for a CPU-stage rewrite: compresses every shared field with each given
# preset at rel 1e-2/1e-3/1e-4 (plus levitus_temp at abs 0.0318, its -1e10 fill included,
# and a NaN/Inf variant of echam5_t) with two binaries at RAYON_NUM_THREADS=1 and 2, and
# `cmp`s the archives, then the values both binaries decode from the new archive. Usage: scripts/same-bytes.sh BEFORE AFTER PRESET...
set -euo pipefail
before=$1 after=$2; shift 2
data=${DATA:-/work/shared/data}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
fields=(etopo5_2161x4320.f32 trinidad_dem_1201x2401.f32 navy_uwnd_132x73x144.f32 navy_vwnd_132x73x144.f32
  levitus_temp_20x180x360.f32 echam5_t_17x96x192.f32 echam5_rhumidity_17x96x192.f32
  ncl_vinth2p_T_2x18x64x128.f32 iris_a1b_tas_240x37x49.f32 um_theta_15x100x100.f32
  ncep_hgt500_djf_65x29x49.f64 hst_acs_47tuc_sci_1024x1024.f32)
# NaN, +Inf, -Inf sprinkled into echam5_t (every 97th, 101st, 103rd value).
python3 - "$data/echam5_t_17x96x192.f32" "$work/specials_17x96x192.f32" <<'PY'
import array, sys
a = array.array('f'); a.frombytes(open(sys.argv[1], 'rb').read())
for i in range(0, len(a), 97): a[i] = float('nan')
for i in range(0, len(a), 101): a[i] = float('inf')
for i in range(0, len(a), 103): a[i] = float('-inf')
open(sys.argv[2], 'wb').write(a.tobytes())
PY
runs=() # "file dtype shape mode bound"
for f in "${fields[@]}"; do
  base=${f%.*} shape=${base##*_} dtype=${f##*.}
  for e in 1e-2 1e-3 1e-4; do runs+=("$data/$f $dtype $shape rel $e"); done
done
runs+=("$data/levitus_temp_20x180x360.f32 f32 20x180x360 abs 0.0318")
for e in 1e-2 1e-3 1e-4; do runs+=("$work/specials_17x96x192.f32 f32 17x96x192 abs $e"); done
n=0 bad=0
for preset in "$@"; do
  for r in "${runs[@]}"; do
    read -r file dtype shape mode e <<<"$r"
    for t in 1 2; do
      for b in before after; do
        bin=$before; [ $b = after ] && bin=$after
        RAYON_NUM_THREADS=$t "$bin" compress -q --backend cpu --preset "$preset" --dtype "$dtype" --shape "$shape" \
          -m "$mode" -e "$e" -o "$work/$b.fzm" -f "$file"
      done
      n=$((n + 1))
      if ! cmp -s "$work/before.fzm" "$work/after.fzm"; then
        bad=$((bad + 1)); echo "DIFFER: $preset $(basename "$file") $mode $e threads=$t"
      fi
      for b in before after; do
        bin=$before; [ $b = after ] && bin=$after
        RAYON_NUM_THREADS=$t "$bin" decompress -q --backend cpu -o "$work/$b.raw" -f "$work/after.fzm"
      done
      if ! cmp -s "$work/before.raw" "$work/after.raw"; then
        bad=$((bad + 1)); echo "DECODE DIFFERS: $preset $(basename "$file") $mode $e threads=$t"
      fi
    done
  done
done
echo "$n archive pairs (and their decodes) compared, $bad differ"
[ $bad = 0 ]
