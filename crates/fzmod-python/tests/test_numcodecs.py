"""fzmod.numcodecs.Fzmod: the numcodecs codec, and Zarr v2-format arrays compressed by it."""

import json
import pickle
import subprocess
import sys

import numcodecs
import numpy
import pytest
import zarr
from conftest import assert_within, smooth_field

import fzmod
from fzmod.numcodecs import Fzmod


def test_config_round_trip_and_registry_lookup():
    codec = Fzmod(preset="cuszp3-plain", mode="abs", bound=0.01)
    config = codec.get_config()
    assert config == {
        "id": "fzmod",
        "preset": "cuszp3-plain",
        "mode": "abs",
        "bound": 0.01,
        "backend": "auto",
        "pipeline": None,
    }
    assert json.loads(json.dumps(config)) == config
    assert Fzmod.from_config(config) == codec
    assert numcodecs.get_codec(config) == codec


def test_entry_point_finds_the_codec_without_importing_fzmod():
    script = (
        "import sys, numcodecs;"
        "c = numcodecs.get_codec({'id': 'fzmod', 'mode': 'abs', 'bound': 0.5});"
        "print(type(c).__module__, type(c).__name__)"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["fzmod.numcodecs", "Fzmod"]


def test_encode_decode_keeps_shape_and_dtype(dtype):
    field = smooth_field((32, 48), dtype)
    codec = Fzmod(mode="abs", bound=1e-3)
    encoded = codec.encode(field)
    decoded = codec.decode(encoded)
    assert_within(field, decoded, 1e-3)
    out = numpy.empty_like(field)
    codec.decode(encoded, out=out)
    assert_within(field, out, 1e-3)


def test_pipeline_config_is_toml_text():
    pipeline = {
        "stage": [
            {"name": "quant", "type": "Quantizer", "error_bound_mode": "abs", "error_bound": 0.1},
            {"name": "coder", "type": "AdaptiveBitpack", "block_size": 32, "inputs": [{"from": "quant", "port": "codes"}]},
        ]
    }
    codec = Fzmod(pipeline=pipeline, mode="abs", bound=0.1)
    assert isinstance(codec.get_config()["pipeline"], str)
    field = smooth_field((1000,), numpy.float32)
    assert_within(field, codec.decode(codec.encode(field)), 0.1)


def test_codec_pickles():
    codec = Fzmod(preset="cuszp", mode="abs", bound=0.25)
    assert pickle.loads(pickle.dumps(codec)) == codec


def test_unknown_preset_fails_at_construction():
    with pytest.raises(fzmod.InvalidArgument, match="unknown preset"):
        Fzmod(preset="zstd")


def test_zarr_v2_array_round_trip(tmp_path, dtype):
    field = smooth_field((100, 130), dtype)
    path = str(tmp_path / "v2.zarr")
    array = zarr.create_array(
        store=path, shape=field.shape, chunks=(40, 50), dtype=dtype, zarr_format=2,
        compressors=Fzmod(mode="abs", bound=1e-2),
    )
    array[:] = field
    metadata = json.loads((tmp_path / "v2.zarr" / ".zarray").read_text())
    assert metadata["compressor"]["id"] == "fzmod"
    assert_within(field, zarr.open_array(path, mode="r")[:], 1e-2)
    # A fresh process reads it through the numcodecs entry point alone.
    script = f"import zarr, numpy; a = zarr.open_array({path!r}, mode='r'); numpy.save(sys.stdout.buffer, a[:])"
    raw = subprocess.run([sys.executable, "-c", "import sys;" + script], capture_output=True, check=True).stdout
    import io

    assert_within(field, numpy.load(io.BytesIO(raw)), 1e-2)


@pytest.mark.parametrize("settings", [{"mode": "absolute", "bound": 1e-3}, {"mode": "abs"}, {"preset": "nope"}])
def test_bad_settings_raise_when_the_codec_is_built(settings):
    with pytest.raises(fzmod.InvalidArgument):
        Fzmod(**settings)


def test_the_configuration_states_the_bound_it_runs_at():
    assert Fzmod().get_config() == {
        "id": "fzmod", "preset": fzmod.DEFAULT_PRESET, "mode": "rel", "bound": 1e-3, "backend": "auto", "pipeline": None,
    }
    with pytest.raises(fzmod.InvalidArgument, match="level"):
        Fzmod.from_config({"id": "fzmod", "level": 3})
