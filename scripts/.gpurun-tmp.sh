ls /tmp/fzdata/etopo5_2161x4320.f32 >/dev/null 2>&1 || { mkdir -p /tmp/fzdata && python3 -c "
import lzma, pathlib
for f in pathlib.Path('.gpu/data').glob('*.xz'):
    pathlib.Path('/tmp/fzdata', f.stem).write_bytes(lzma.decompress(f.read_bytes()))
e = pathlib.Path('/tmp/fzdata/etopo5_2161x4320.f32').read_bytes()
pathlib.Path('/tmp/e8.f32').write_bytes(e * 8)
"; }
export FZMOD_DATA=/tmp/fzdata FZMOD_REPO=$PWD
./.gpu/gpu-tests --include-ignored --test-threads 1 2>&1 | grep -E "^test |result|panicked|assert" | tail -14
b() { rm -f /tmp/b.json; pipe="--preset $1"; [[ $1 == *.toml ]] && pipe="--config $1"; ./.gpu/fzmod bench $3 --dtype f32 --shape $4 $pipe -m ${6:-rel} -e ${5:-1e-3} --backend cuda --runs 20 --json /tmp/b.json >/dev/null 2>&1; python3 -c "import json; j=json.load(open('/tmp/b.json')); print('$1 $2', round(j['ratio'],3), round(j['compress_gbps']['median'],1), round(j['decompress_gbps']['median'],1), 'peak', j.get('peak_device_bytes'))"; }
E=/tmp/fzdata/etopo5_2161x4320.f32
b fzgpu 2d $E 2161x4320
b pfpl 2d $E 2161x4320
b pfpl x8 /tmp/e8.f32 74684160
b fzgpu x8-2d /tmp/e8.f32 17288x4320
b cuszp2 x8 /tmp/e8.f32 74684160
b scripts/chains/tiled-negabinary-rze.toml x8-2d /tmp/e8.f32 17288x4320
b scripts/chains/nd-lorenzo-zigzag-rze.toml x8 /tmp/e8.f32 74684160
b cuszp2 levitus-abs0.01 /tmp/fzdata/levitus_temp_20x180x360.f32 20x180x360 0.01 abs
