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
        assert (info["preset"], info["shape"], info["dtype"]) == (preset, (32, 32), field.dtype.name)


def test_mapping_helper_with_create_dataset_kwargs(tmp_path):
    field = smooth_field((20, 30, 40), numpy.float32)
    path = tmp_path / "m.h5"
    options = fzmod.h5.Fzmod(chunks=(10, 30, 20), dtype=field.dtype, mode="rel", bound=1e-3)
    assert options["compression"] == 400 and len(options["compression_opts"]) == 10
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
        ({"dtype": "int16"}, "float32 or float64"),
        ({"preset": "nope"}, "no HDF5 id"),
        ({"mode": "sideways"}, "abs or rel"),
        ({"bound": 0}, "bound"),
        ({"chunks": ()}, "chunks"),
    ],
)
def test_helper_refuses_bad_settings(kwargs, message):
    settings = {"chunks": (8, 8), "dtype": "float32", **kwargs}
    with pytest.raises(fzmod.InvalidArgument, match=message):
        fzmod.h5.Fzmod(**settings)


def test_cd_values_layout():
    cd = fzmod.h5.cd_values((4, 5), "float64", "cuszp3-plain", "abs", 0.5)
    # version, preset id, mode, bound (f64 bits, low then high), dtype code, ndim, dims
    assert cd == (1, 3, 0, 0, 0x3FE00000, 9, 2, 4, 5)


def test_a_failing_chunk_is_stored_uncompressed_and_reads_back_exactly(tmp_path):
    field = smooth_field((16, 16), numpy.float32)
    float64_chunks = fzmod.h5.cd_values((16, 16), "float64", "cuszp2", "abs", 1e-3)  # the data is float32
    with h5py.File(tmp_path / "raw.h5", "w") as f:
        f.create_dataset("t", data=field, chunks=(16, 16), compression=fzmod.h5.FILTER_ID,
                         compression_opts=float64_chunks)
    with h5py.File(tmp_path / "raw.h5", "r") as f:
        assert numpy.array_equal(f["t"][:], field)


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
