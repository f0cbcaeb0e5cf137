"""Masked fields (issue 14): NaN land, a fill value such as a CF _FillValue, and the fill
padding of a partial Zarr edge chunk, through fzmod.compress and every codec."""

import os

import numpy
import pytest
import zarr
from conftest import smooth_field

import fzmod
import fzmod.h5
import fzmod.numcodecs
import fzmod.xarray
from fzmod import _hdf5_plugin
from fzmod.zarr import FzmodCodec

FILL = -1e10


def land_field(shape, dtype, land_value):
    """A smooth ocean with a blocky continent of `land_value` (about 40 % of the points)."""
    field = smooth_field(shape, dtype)
    i, j = numpy.meshgrid(*[numpy.arange(n) for n in shape[-2:]], indexing="ij")
    land = ((i // 8 + j // 11) % 5 < 2) | (j < shape[-1] // 6)
    field[..., land] = land_value
    return field, numpy.broadcast_to(land, shape)


def check_masked(original, decoded, land, abs_bound):
    """Ocean within the bound; land bit for bit."""
    ocean = ~land
    error = numpy.abs(original[ocean].astype("f8") - decoded[ocean].astype("f8")).max()
    assert error <= abs_bound, f"max error {error} > {abs_bound}"
    assert numpy.array_equal(original[land].view(numpy.uint8), decoded[land].view(numpy.uint8))


@pytest.mark.parametrize("preset", sorted(fzmod.presets()))
@pytest.mark.parametrize("land_value", [FILL, numpy.nan], ids=["fill", "nan"])
def test_compress_with_a_mask_every_preset(preset, land_value, dtype):
    field, land = land_field((60, 90), dtype, land_value)
    masking = {"fill_value": FILL} if land_value == FILL else {"mask_nan": True}
    ocean = field[~land].astype("f8")
    bound = 1e-3 * (ocean.max() - ocean.min())
    masked = fzmod.compress(field, preset=preset, mode="abs", bound=bound, **masking)
    check_masked(field, fzmod.decompress(masked), land, bound)
    assert fzmod.inspect(masked)["preset"] == f"masked-{preset}"
    assert fzmod.inspect(masked)["stages"][0]["type"] == "Mask"
    plain = fzmod.compress(field, preset=preset, mode="abs", bound=bound)
    if preset.startswith("interp") and land_value is numpy.nan:
        # The interpolation presets mask NaN themselves: the same stages, the name aside.
        assert fzmod.inspect(plain)["stages"][0]["type"] == "Mask"
        assert abs(len(masked) - len(plain)) <= 64, (len(masked), len(plain))
    elif preset in ("pfpl", "interp", "interp-fast"):
        # Their outliers are not coded in runs (pfpl keeps them inline, in its bit planes; the
        # interpolation presets have their own channel): without the mask the land costs more.
        assert len(masked) * 1.1 < len(plain), (len(masked), len(plain))
    else:
        # Without the mask the land is outlier runs of a few bytes each (FORMAT.md 6.1.1):
        # neither form lets it collapse the ratio of the ocean.
        assert max(len(masked), len(plain)) * 2.5 < field.nbytes, (len(masked), len(plain))


def test_rel_is_relative_to_the_unmasked_values():
    field, land = land_field((40, 50), numpy.float32, FILL)
    data = fzmod.compress(field, mode="rel", bound=1e-3, fill_value=FILL)
    ocean = field[~land].astype("f8")
    assert fzmod.inspect(data)["abs_bound"] == pytest.approx(1e-3 * (ocean.max() - ocean.min()))
    check_masked(field, fzmod.decompress(data), land, 1e-3 * (ocean.max() - ocean.min()))


def test_mask_settings_are_checked():
    with pytest.raises(fzmod.InvalidArgument, match="mask_nan"):
        fzmod.compress(numpy.zeros(4, "f4"), mask_nan="yes")
    with pytest.raises(fzmod.InvalidArgument, match="fill_value"):
        fzmod.compress(numpy.zeros(4, "f4"), fill_value="land")
    # A pipeline that starts with a Mask stage keeps it and masks what is asked for too; a
    # second, different fill value is refused.
    fzmod.compress(numpy.zeros(4, "f4"), pipeline=MASKED_TOML, mask_nan=True)
    fzmod.compress(numpy.zeros(4, "f4"), pipeline=MASKED_TOML, fill_value=FILL)
    with pytest.raises(fzmod.InvalidArgument, match="already masks the fill value"):
        fzmod.compress(numpy.zeros(4, "f4"), pipeline=MASKED_TOML.replace('"Mask"', '"Mask"\nfill_value = 7'),
                       fill_value=FILL)
    # Everything masked, and nothing masked, both round-trip.
    for a in (numpy.full(100, FILL, "f4"), numpy.linspace(0, 1, 100, dtype="f4")):
        b = fzmod.decompress(fzmod.compress(a, fill_value=FILL, mode="abs", bound=1e-3))
        check_masked(a, b, a == numpy.float32(FILL), 1e-3) if (a != numpy.float32(FILL)).any() else None
        assert (a != numpy.float32(FILL)).any() or numpy.array_equal(a.view("u4"), b.view("u4"))


MASKED_TOML = """
[[stage]]
name = "mask"
type = "Mask"
[[stage]]
name = "quant"
type = "Quantizer"
error_bound = 1e-3
inputs = [{ from = "mask", port = "values" }]
[[stage]]
name = "coder"
type = "AdaptiveBitpack"
inputs = [{ from = "quant", port = "codes" }]
"""


def edge_chunk_ratios(tmp_path, codec, name):
    """Ratios (original bytes of the valid part / stored bytes) of a full chunk and of the
    partial edge chunk of a (200, 128) array in (128, 128) chunks with fill_value NaN."""
    i, j = numpy.meshgrid(numpy.arange(200), numpy.arange(128), indexing="ij")
    field = (20 * numpy.sin(i / 30) + 10 * numpy.cos(j / 20)).astype(numpy.float32)
    path = tmp_path / name
    array = zarr.create_array(
        store=str(path), shape=field.shape, chunks=(128, 128), dtype="f4", fill_value=numpy.nan,
        serializer=codec, compressors=None,
    )
    array[:] = field
    assert numpy.abs(zarr.open_array(str(path), mode="r")[:].astype("f8") - field).max() <= 1e-2
    full = os.path.getsize(path / "c" / "0" / "0")
    edge = os.path.getsize(path / "c" / "1" / "0")
    return 128 * 128 * 4 / full, 72 * 128 * 4 / edge


def test_nan_padded_zarr_edge_chunk_compresses_like_a_full_chunk(tmp_path):
    full, edge = edge_chunk_ratios(tmp_path, FzmodCodec(mode="abs", bound=1e-2), "masked.zarr")
    # (The fill from a neighbour of 56 padding rows costs a little: 0.82x here.)
    assert edge >= 0.75 * full, (full, edge)
    # Without the NaN mask the padding (44 % of the chunk) is outlier runs, one per row: it
    # costs little too.
    plain = FzmodCodec(mode="abs", bound=1e-2, mask_nan=False, fill_value=None)
    full_plain, edge_plain = edge_chunk_ratios(tmp_path, plain, "plain.zarr")
    assert edge_plain >= 0.75 * full_plain, (full_plain, edge_plain)


def test_zarr_codec_masks_the_array_fill_value(tmp_path):
    field, land = land_field((64, 96), numpy.float32, FILL)
    kwargs = dict(shape=field.shape, chunks=(32, 48), dtype="f4", compressors=None)
    sizes = {}
    for name, codec, fill in [
        ("auto", FzmodCodec(mode="abs", bound=1e-2), FILL),
        ("off", FzmodCodec(mode="abs", bound=1e-2, fill_value=None), FILL),
        ("explicit", FzmodCodec(mode="abs", bound=1e-2, fill_value=FILL), 0.0),
    ]:
        path = tmp_path / f"{name}.zarr"
        array = zarr.create_array(store=str(path), fill_value=fill, serializer=codec, **kwargs)
        array[:] = field
        check_masked(field, zarr.open_array(str(path), mode="r")[:], land, 1e-2)
        sizes[name] = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path / "c") for f in fs)
    # The array's fill value is masked as if given; the mask fills land from its neighbours,
    # which codes smaller than the land's outlier runs here.
    assert sizes["auto"] == sizes["explicit"] and sizes["auto"] < sizes["off"], sizes


def test_zarr_codec_mask_configuration():
    assert "fill_value" not in FzmodCodec().to_dict()["configuration"]
    assert "mask_nan" not in FzmodCodec().to_dict()["configuration"]
    for codec in [
        FzmodCodec(fill_value=FILL),
        FzmodCodec(fill_value=None, mask_nan=False),
        FzmodCodec(fill_value=float("-inf")),
    ]:
        assert FzmodCodec.from_dict(codec.to_dict()) == codec
    assert FzmodCodec(fill_value=float("-inf")).to_dict()["configuration"]["fill_value"] == "-Infinity"
    assert FzmodCodec(fill_value=float("nan"), mask_nan=False) == FzmodCodec(fill_value=None)
    with pytest.raises(fzmod.InvalidArgument, match="fill_value"):
        FzmodCodec(fill_value="land")
    # The array's fill value is masked unless it is zero (Zarr's default) or NaN (mask_nan).
    spec = type("Spec", (), {})
    for array_fill, expected in [(FILL, (True, FILL)), (0.0, (True, None)), (numpy.nan, (True, None))]:
        spec.fill_value = numpy.float32(array_fill)
        assert FzmodCodec().chunk_mask(spec) == pytest.approx(expected, nan_ok=True)


def test_numcodecs_codec_with_a_fill_value():
    field, land = land_field((50, 70), numpy.float64, FILL)
    codec = fzmod.numcodecs.Fzmod(mode="abs", bound=1e-3, fill_value=FILL)
    config = codec.get_config()
    assert (config["fill_value"], config["mask_nan"]) == (FILL, True)
    again = fzmod.numcodecs.Fzmod.from_config(config)
    encoded = again.encode(field)
    check_masked(field, again.decode(encoded).reshape(field.shape), land, 1e-3)
    assert len(encoded) < len(fzmod.numcodecs.Fzmod(mode="abs", bound=1e-3).encode(field))
    assert "fill_value" not in fzmod.numcodecs.Fzmod().get_config()
    assert fzmod.numcodecs.Fzmod(fill_value=numpy.nan).get_config()["mask_nan"] is True


@pytest.mark.skipif(not _hdf5_plugin.available(), reason="HDF5 plugin not built (build-wheel.sh)")
def test_hdf5_filter_masks_the_dataset_fill_value(tmp_path):
    import h5py

    field, land = land_field((64, 80), numpy.float32, FILL)
    path = tmp_path / "m.h5"
    with h5py.File(path, "w") as f:
        fzmod.h5.create_dataset(f, "masked", field, chunks=(32, 40), mode="abs", bound=1e-2, fillvalue=FILL)
        fzmod.h5.create_dataset(f, "plain", field, chunks=(32, 40), mode="abs", bound=1e-2)
    with h5py.File(path, "r") as f:
        cd = f["masked"].id.get_create_plist().get_filter(0)[2]
        assert cd[0] == 2 and cd[5] == 1 | 4, cd
        check_masked(field, f["masked"][:], land, 1e-2)
        masked = f["masked"].id.get_storage_size()
        plain = f["plain"].id.get_storage_size()
    assert masked < plain, (masked, plain)
    # cd_values: layout 1 without a mask, 2 with one.
    assert fzmod.h5.cd_values("cuszp2", "abs", 0.5, mask_nan=True) == (2, 1, 0, 0, 0x3FE00000, 1, 0, 0)
    assert len(fzmod.h5.cd_values("cuszp2", "abs", 0.5)) == 5


def test_xarray_encoding_masks_the_cf_fill_value():
    class Variable:
        def __init__(self, data, attrs):
            self.data, self.attrs, self.encoding, self.dtype = data, attrs, {}, data.dtype

    class Dataset:
        data_vars = {"t": Variable(land_field((20, 30), numpy.float32, FILL)[0], {"_FillValue": FILL})}

    enc = fzmod.xarray.encoding(Dataset(), rel=1e-3)["t"]["serializer"]
    assert (enc.mask_nan, enc.fill_value) == (True, FILL)
    enc2 = fzmod.xarray.encoding(Dataset(), rel=1e-3, zarr_format=2)["t"]["compressors"][0]
    assert enc2.fill_value == FILL
