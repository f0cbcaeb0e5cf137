"""fzmod.zarr.FzmodCodec: Zarr v3 serializer, alone and inside sharding."""

import io
import json
import os
import subprocess
import sys

import numpy
import pytest
import zarr
from conftest import assert_within, smooth_field

import fzmod
from fzmod.zarr import FzmodCodec


def test_dict_round_trip():
    codec = FzmodCodec(preset="cuszp3-outlier", mode="abs", bound=0.5)
    as_dict = codec.to_dict()
    assert as_dict == {
        "name": "fzmod",
        "configuration": {"version": 1, "preset": "cuszp3-outlier", "mode": "abs", "bound": 0.5, "backend": "auto"},
    }
    assert FzmodCodec.from_dict(as_dict) == codec
    assert FzmodCodec.from_dict({"name": "fzmod"}) == FzmodCodec()
    # Metadata written before the version field existed is version 1.
    unversioned = {"name": "fzmod", "configuration": {"preset": "cuszp2", "mode": "rel", "bound": 1e-3}}
    assert FzmodCodec.from_dict(unversioned) == FzmodCodec()
    # The configuration states the bound it runs at, defaults included.
    assert FzmodCodec().to_dict()["configuration"] == {
        "version": 1, "preset": fzmod.DEFAULT_PRESET, "mode": "rel", "bound": 1e-3, "backend": "auto",
    }


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"mode": "absolute", "bound": 1e-3}, "absolute"),
        ({"mode": "abs"}, "without a value"),
        ({"preset": "nope"}, "nope"),
        ({"bound": 0}, "bound"),
        ({"backend": "tpu"}, "tpu"),
    ],
)
def test_bad_settings_raise_when_the_codec_is_built(settings, message):
    # Once accepted here and raised from inside to_zarr, on the first chunk.
    with pytest.raises(fzmod.InvalidArgument, match=message):
        FzmodCodec(**settings)


@pytest.mark.parametrize(
    "configuration, message",
    [({"version": 2}, "version 2"), ({"level": 3}, "level"), ({"version": "1"}, "version")],
)
def test_configurations_of_other_versions_or_with_unknown_fields_are_refused(configuration, message):
    with pytest.raises(fzmod.InvalidArgument, match=message):
        FzmodCodec.from_dict({"name": "fzmod", "configuration": configuration})


def write(path, field, chunks, shards=None, codec=None):
    array = zarr.create_array(
        store=path, shape=field.shape, chunks=chunks, shards=shards, dtype=field.dtype,
        serializer=codec or FzmodCodec(mode="abs", bound=1e-2), compressors=None,
    )
    array[:] = field
    return array


def test_serializer_round_trip(tmp_path, dtype):
    field = smooth_field((90, 110), dtype)
    path = str(tmp_path / "a.zarr")
    write(path, field, chunks=(32, 32))
    metadata = json.loads((tmp_path / "a.zarr" / "zarr.json").read_text())
    assert metadata["codecs"][0]["name"] == "fzmod"
    reopened = zarr.open_array(path, mode="r")
    assert_within(field, reopened[:], 1e-2)
    assert_within(field[10:50, 5:77], reopened[10:50, 5:77], 1e-2)


def test_inside_sharding(tmp_path, dtype):
    field = smooth_field((64, 96, 20), dtype)
    path = str(tmp_path / "s.zarr")
    write(path, field, chunks=(16, 16, 10), shards=(32, 48, 20))
    metadata = json.loads((tmp_path / "s.zarr" / "zarr.json").read_text())
    sharding = metadata["codecs"][0]
    assert sharding["name"] == "sharding_indexed"
    assert sharding["configuration"]["codecs"][0]["name"] == "fzmod"
    reopened = zarr.open_array(path, mode="r")
    assert_within(field, reopened[:], 1e-2)
    assert_within(field[3:20, 40:50, 7], reopened[3:20, 40:50, 7], 1e-2)


def test_partial_edge_chunks(tmp_path):
    field = smooth_field((37, 41), numpy.float32)
    path = str(tmp_path / "edge.zarr")
    write(path, field, chunks=(16, 16))
    assert_within(field, zarr.open_array(path, mode="r")[:], 1e-2)


def test_fresh_process_opens_without_importing_fzmod(tmp_path, dtype):
    field = smooth_field((50, 60), dtype)
    path = str(tmp_path / "fresh.zarr")
    write(path, field, chunks=(25, 30), shards=(50, 60))
    script = (
        "import sys, numpy, zarr;"
        f"a = zarr.open_array({path!r}, mode='r');"
        "numpy.save(sys.stdout.buffer, a[:])"
    )
    raw = subprocess.run([sys.executable, "-c", script], capture_output=True, check=True).stdout
    assert_within(field, numpy.load(io.BytesIO(raw)), 1e-2)


def test_integer_arrays_are_refused(tmp_path):
    with pytest.raises(fzmod.InvalidArgument, match="float32 or float64"):
        zarr.create_array(store=str(tmp_path / "i.zarr"), shape=(10,), chunks=(5,), dtype="int32",
                          serializer=FzmodCodec(), compressors=None)


RUST_FIXTURE = os.path.join(os.path.dirname(__file__), "..", "..", "fzmod-zarrs", "tests", "fixtures", "rust_written.zarr")


@pytest.mark.skipif(not os.path.isdir(RUST_FIXTURE), reason="fzmod-zarrs fixture not in this checkout")
def test_opens_an_array_written_by_zarrs():
    # Written by crates/fzmod-zarrs (the zarrs codec): v[i, j] = 10 sin(0.3 i) + 5 cos(0.2 j), abs 0.01.
    i, j = numpy.meshgrid(numpy.arange(20), numpy.arange(30), indexing="ij")
    expected = 10 * numpy.sin(0.3 * i) + 5 * numpy.cos(0.2 * j)
    array = zarr.open_array(RUST_FIXTURE, mode="r")
    assert array.metadata.to_dict()["codecs"][0]["name"] == "fzmod"
    assert_within(expected, array[:], 0.01)
