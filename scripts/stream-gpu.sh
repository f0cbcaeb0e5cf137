#!/usr/bin/env bash
# GPU streaming of a field larger than the device's memory and disk through a pipe (issue 16):
# NZ planes of 1024x1024 f32 from `stream_field.py fastgen` (NZ=25600: 100 GiB) into
# `fzmod compress - --stream --backend cuda`, device memory sampled by nvidia-smi; then a region
# of five whole planes decoded on the GPU and the CPU, checked against the generator and
# compared byte for byte. Run on the device with .gpu carried (scripts/prepare-gpu.sh):
#   NZ=25600 bash scripts/stream-gpu.sh
set -u
if [ -x /usr/bin/time ]; then TV="/usr/bin/time -v"; TF="/usr/bin/time -f"; else echo "no /usr/bin/time"; TV=""; TF="tf"; fi
tf() { shift; local s=$(date +%s.%N); "$@"; echo "  $(python3 -c "print(round($(date +%s.%N)-$s,2))") s"; }
NZ=${NZ:-2560}; E=${E:-1e-3}; P=${P:-cuszp2}
shape=${NZ}x1024x1024
echo "generator alone, 1 GiB:"; $TF "  %e s" python3 scripts/stream_field.py fastgen 256 1024 1024 > /dev/null
nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 > /tmp/smi.log &
smi=$!
start=$(date +%s.%N)
python3 scripts/stream_field.py fastgen $NZ 1024 1024 | $TV ./.gpu/fzmod compress - --stream --dtype f32 --shape $shape \
  --preset $P -m abs -e $E --backend cuda -o /tmp/big.fzm -f --progress --json /tmp/big.json 2> /tmp/big.err
rc=$?
end=$(date +%s.%N)
kill $smi
grep -E "Maximum resident|Elapsed" /tmp/big.err; tail -c 600 /tmp/big.err | tr '\r' '\n' | tail -3
echo "rc $rc, wall $(python3 -c "print(round($end-$start,1))") s, input $((NZ*4)) MiB, archive $(stat -c %s /tmp/big.fzm) bytes"
echo "device memory used (MiB): max $(sort -n /tmp/smi.log | tail -1), idle before $(head -1 /tmp/smi.log), samples $(wc -l < /tmp/smi.log)"
# Check a region of whole planes in the middle, decoded on the GPU and on the CPU.
z0=$((NZ/2+3))
for b in cuda cpu; do
  $TF "  region decode ($b) %e s, %M KiB" ./.gpu/fzmod decompress /tmp/big.fzm --region $z0:$((z0+5)),:,: --backend $b -o /tmp/region.$b.f32 -f
done
python3 scripts/stream_field.py fastcheck $z0 5 1024 1024 $E < /tmp/region.cuda.f32 && cmp /tmp/region.cuda.f32 /tmp/region.cpu.f32 && echo "region: GPU == CPU bytes"
rm -f /tmp/big.fzm
