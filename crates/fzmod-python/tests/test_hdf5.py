"""The HDF5 filter plugin through h5py: written with fzmod.h5's helper, read back by h5py
in this process and in a fresh one that only has HDF5_PLUGIN_PATH."""

import io
import os
import subprocess
import sys

import h5py
import numpy
import pytest
from conftest import assert_within, smooth_field

import fzmod
import fzmod.h5
from fzmod import _hdf5_plugin

pytestmark = pytest.mark.skipif(not _hdf5_plugin.available(), reason="HDF5 plugin not built (build-wheel.sh)")


@pytest.mark.parametrize("preset", list(fzmod.h5.PRESET_IDS))
def test_round_trip_with_each_preset(tmp_path, preset, dtype):
    field = smooth_field((100, 70), dtype)
    path = tmp_path / "f.h5"
    with h5py.File(path, "w") as f:
        fzmod.h5.create_dataset(f, "t", field, chunks=(32, 32), preset=preset, mode="abs", bound=1e-2)
    with h5py.File(path, "r") as f:
        dataset = f["t"]
        filter_id, _, cd_values, name = dataset.id.get_create_plist().get_filter(0)
        assert (filter_id, cd_values[1]) == (fzmod.h5.FILTER_ID, fzmod.h5.PRESET_IDS[preset])
        assert name.startswith(b"fzmod")
        assert_within(field, dataset[:], 1e-2)
        # The stored chunk is an fzmod archive of the (full-size) chunk.
        _, chunk = dataset.id.read_direct_chunk((0, 0))
        info = fzmod.inspect(chunk)
        assert (info["preset"], info["shape"], info["dtype"]) == (preset, [32, 32], field.dtype.name)
        # The plugin's set_local stored the dataset's own element type and chunk shape.
        assert tuple(cd_values[5:]) == ({numpy.float32: 8, numpy.float64: 9}[dtype], 2, 32, 32)


def test_every_preset_is_usable_through_hdf5():
    assert set(fzmod.h5.PRESET_IDS) == set(fzmod.presets())


def test_mapping_helper_with_create_dataset_kwargs(tmp_path):
    field = smooth_field((20, 30, 40), numpy.float32)
    path = tmp_path / "m.h5"
    options = fzmod.h5.Fzmod(mode="rel", bound=1e-3)
    assert options["compression"] == 400 and len(options["compression_opts"]) == 5
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=field, chunks=(10, 30, 20), **options)
    with h5py.File(path, "r") as f:
        decoded = f["x"][:]
    # rel is relative to each chunk's range, which the global range bounds.
    value_range = float(field.max()) - float(field.min())
    assert_within(field, decoded, 1e-3 * value_range)
    assert os.path.getsize(path) < field.nbytes / 2


def test_fresh_process_reads_with_the_plugin_path_only(tmp_path):
    field = smooth_field((64, 64), numpy.float64)
    path = tmp_path / "fresh.h5"
    with h5py.File(path, "w") as f:
        fzmod.h5.create_dataset(f, "t", field, chunks=(64, 64), mode="abs", bound=1e-4)
    script = f"import sys, h5py, numpy; numpy.save(sys.stdout.buffer, h5py.File({str(path)!r}, 'r')['t'][:])"
    env = dict(os.environ, HDF5_PLUGIN_PATH=_hdf5_plugin.PLUGIN_DIR)
    raw = subprocess.run([sys.executable, "-c", script], capture_output=True, check=True, env=env).stdout
    assert_within(field, numpy.load(io.BytesIO(raw)), 1e-4)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"preset": "nope"}, "no HDF5 id"),
        ({"mode": "sideways", "bound": 1e-3}, "sideways"),
        ({"bound": 0}, "bound"),
        # A mode alone must not silently reuse the preset's relative 1e-3 as an absolute 1e-3.
        ({"mode": "abs"}, "without a value"),
    ],
)
def test_helper_refuses_bad_settings(kwargs, message):
    with pytest.raises(fzmod.InvalidArgument, match=message):
        fzmod.h5.Fzmod(**kwargs)


def test_cd_values_layout():
    cd = fzmod.h5.cd_values("cuszp3-plain", "abs", 0.5)
    # version, preset id, mode, bound (f64 bits, low then high); the plugin adds the rest
    assert cd == (1, 3, 0, 0, 0x3FE00000)
    assert fzmod.h5.cd_values()[:3] == (1, fzmod.h5.PRESET_IDS[fzmod.DEFAULT_PRESET], 1)


@pytest.mark.parametrize("stored_type", ["int32", "int16", "uint8", ">f4", ">f8"])
def test_datasets_the_filter_cannot_compress_are_refused(tmp_path, stored_type):
    # Was: an int32 dataset came back all zeros. Now the dataset is not created at all.
    data = numpy.arange(256).reshape(16, 16).astype(stored_type)
    with h5py.File(tmp_path / "refused.h5", "w") as f:
        with pytest.raises((ValueError, OSError, RuntimeError)):
            f.create_dataset("t", data=data, chunks=(16, 16), **fzmod.h5.Fzmod(mode="abs", bound=1e-3))
        assert "t" not in f


def test_dtype_and_chunk_shape_come_from_the_dataset_not_the_options(tmp_path):
    # Old-style options claiming float64 chunks of 16x16 for a float32 dataset chunked 8x32:
    # once stored uncompressed (with a line on stderr); the dataset's own layout wins now.
    field = smooth_field((16, 64), numpy.float32)
    stale = (1, 1, 0, 0xD2F1A9FC, 0x3F50624D, 9, 2, 16, 16)  # cuszp2, abs 1e-3
    with h5py.File(tmp_path / "t.h5", "w") as f:
        f.create_dataset("t", data=field, chunks=(8, 32), compression=fzmod.h5.FILTER_ID, compression_opts=stale)
    with h5py.File(tmp_path / "t.h5", "r") as f:
        assert_within(field, f["t"][:], 1e-3)
        _, chunk = f["t"].id.read_direct_chunk((0, 0))
        info = fzmod.inspect(chunk)
        assert (info["shape"], info["dtype"], info["abs_bound"]) == ([8, 32], "float32", 1e-3)


@pytest.mark.parametrize("order", ["import fzmod, h5py", "import h5py, fzmod"])
def test_import_fzmod_registers_the_plugin_before_or_after_h5py(tmp_path, order):
    field = smooth_field((32, 32), numpy.float32)
    path = tmp_path / "order.h5"
    with h5py.File(path, "w") as f:
        fzmod.h5.create_dataset(f, "t", field, chunks=(32, 32), mode="abs", bound=1e-3)
    script = f"import sys, numpy; {order}; numpy.save(sys.stdout.buffer, h5py.File({str(path)!r}, 'r')['t'][:])"
    env = {k: v for k, v in os.environ.items() if k != "HDF5_PLUGIN_PATH"}
    raw = subprocess.run([sys.executable, "-c", script], capture_output=True, check=True, env=env).stdout
    assert_within(field, numpy.load(io.BytesIO(raw)), 1e-3)
