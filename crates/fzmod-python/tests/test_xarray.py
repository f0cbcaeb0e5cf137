"""fzmod.xarray: absolute bounds from each variable's global valid range (fill values and NaN
left out), as the encoding of to_zarr / to_netcdf. The helper needs no xarray (a duck-typed
dataset of numpy or Dask arrays); the last tests run xarray itself where it is installed."""

from types import SimpleNamespace

import dask.array as da
import numpy
import pytest
import zarr
from conftest import smooth_field

import fzmod
import fzmod.xarray
from fzmod.numcodecs import Fzmod
from fzmod.zarr import FzmodCodec

FILL = 1e20
REL = 1e-3


def field_with_gaps(dtype):
    """A smooth field in [-150, 150]-ish whose first rows are CF fill values and with a NaN."""
    values = smooth_field((64, 48), dtype)
    values[:4] = FILL
    values[10, 10] = numpy.nan
    return values


def variable(data, **attrs):
    return SimpleNamespace(data=data, dtype=data.dtype, attrs=attrs, encoding={})


def dataset(**variables):
    return SimpleNamespace(data_vars=variables)


def valid_range(values):
    valid = values[numpy.isfinite(values) & (values != values.dtype.type(FILL))]
    return float(valid.max()) - float(valid.min())


@pytest.mark.parametrize("lazy", [False, True], ids=["numpy", "dask"])
def test_bounds_come_from_the_global_valid_range(dtype, lazy):
    values = field_with_gaps(dtype)
    data = da.from_array(values, chunks=(16, 16)) if lazy else values
    ds = dataset(
        t=variable(data, _FillValue=FILL),
        flat=variable(numpy.full((8,), 3.0, dtype)),  # constant: no positive relative bound
        counts=variable(numpy.arange(8, dtype=numpy.int32)),  # not floats: not fzmod's
    )
    bounds = fzmod.xarray.abs_bounds(ds, rel=REL)
    assert list(bounds) == ["t"]
    assert bounds["t"] == pytest.approx(REL * valid_range(values))
    assert bounds["t"] < 1  # the fill value (1e20) did not widen the range
    assert fzmod.xarray.valid_range(data, [FILL]) == pytest.approx(
        (float(numpy.nanmin(values[4:])), float(numpy.nanmax(values[4:])))
    )
    assert fzmod.xarray.valid_range(numpy.full(4, numpy.nan)) == (None, None)


def test_fill_values_are_read_from_encoding_and_attrs():
    v = variable(numpy.zeros(2), missing_value=-999.0)
    v.encoding["_FillValue"] = FILL
    assert fzmod.xarray.fill_values(v) == (FILL, -999.0)


def test_per_chunk_rel_is_off_and_the_encoding_keeps_the_bound(tmp_path, dtype):
    values = field_with_gaps(dtype)
    bound = REL * valid_range(values)

    def write(name, serializer):
        array = zarr.create_array(store=str(tmp_path / name), shape=values.shape, chunks=(16, 48),
                                  dtype=values.dtype, serializer=serializer, compressors=None)
        array[:] = values
        return array[:]

    valid = numpy.isfinite(values) & (values != values.dtype.type(FILL))
    # The defect: rel on a chunk holding a fill value is relative to ~1e20.
    per_chunk = write("per-chunk.zarr", FzmodCodec(mode="rel", bound=REL))
    assert numpy.abs(per_chunk[:16][valid[:16]].astype("f8") - values[:16][valid[:16]]).max() > 100 * bound
    # The helper's absolute bound holds everywhere, and fill values come back exactly.
    encoding = fzmod.xarray.encoding(dataset(t=variable(values, _FillValue=FILL)), rel=REL)
    assert encoding["t"]["compressors"] is None
    back = write("global.zarr", encoding["t"]["serializer"])
    assert numpy.abs(back[valid].astype("f8") - values[valid]).max() <= bound
    assert numpy.array_equal(back[~valid].view(numpy.uint8), values[~valid].view(numpy.uint8))


def test_encoding_for_each_engine():
    ds = dataset(t=variable(field_with_gaps(numpy.float32), _FillValue=FILL))
    bound = fzmod.xarray.abs_bounds(ds)["t"]
    v3 = fzmod.xarray.encoding(ds)["t"]["serializer"]
    assert (v3.mode, v3.bound, v3.preset) == ("abs", bound, fzmod.DEFAULT_PRESET)
    (v2,) = fzmod.xarray.encoding(ds, zarr_format=2, preset="cuszp3-plain")["t"]["compressors"]
    assert isinstance(v2, Fzmod) and (v2.mode, v2.bound, v2.preset) == ("abs", bound, "cuszp3-plain")
    h5 = fzmod.xarray.encoding(ds, engine="h5netcdf")["t"]
    assert h5["compression"] == 400 and h5["compression_opts"][2] == 0  # abs
    with pytest.raises(fzmod.InvalidArgument, match="engine"):
        fzmod.xarray.encoding(ds, engine="scipy")
    with pytest.raises(fzmod.InvalidArgument, match="rel"):
        fzmod.xarray.abs_bounds(ds, rel=0)


def xarray_dataset(dtype):
    xr = pytest.importorskip("xarray")
    values = smooth_field((64, 48), dtype)
    values[:4] = numpy.nan  # written as the _FillValue
    t = xr.Variable(("y", "x"), values, encoding={"_FillValue": FILL, "chunks": (16, 48)})
    return xr.Dataset({"t": t}), values


def assert_round_trip(values, back):
    back = numpy.asarray(back)
    valid = numpy.isfinite(values)
    bound = REL * (float(numpy.nanmax(values)) - float(numpy.nanmin(values)))
    assert numpy.isnan(back[~valid]).all()
    assert numpy.abs(back[valid].astype("f8") - values[valid]).max() <= bound


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_xarray_to_zarr(tmp_path, zarr_format, dtype):
    xr = pytest.importorskip("xarray")
    ds, values = xarray_dataset(dtype)
    path = str(tmp_path / "x.zarr")
    encoding = fzmod.xarray.encoding(ds, rel=REL, zarr_format=zarr_format)
    ds.to_zarr(path, encoding=encoding, zarr_format=zarr_format, consolidated=False)
    assert_round_trip(values, xr.open_zarr(path, consolidated=False)["t"].values)
    # And through Dask, chunk by chunk.
    ds.chunk({"y": 16}).to_zarr(str(tmp_path / "d.zarr"), encoding=encoding, zarr_format=zarr_format,
                                 consolidated=False)
    assert_round_trip(values, xr.open_zarr(str(tmp_path / "d.zarr"), consolidated=False)["t"].values)


def test_xarray_to_netcdf_through_h5netcdf(tmp_path, dtype):
    xr = pytest.importorskip("xarray")
    pytest.importorskip("h5netcdf")
    ds, values = xarray_dataset(dtype)
    path = tmp_path / "x.nc"
    encoding = fzmod.xarray.encoding(ds, rel=REL, engine="h5netcdf")
    encoding["t"]["chunksizes"] = (16, 48)
    ds.to_netcdf(path, engine="h5netcdf", encoding=encoding)
    with xr.open_dataset(path, engine="h5netcdf") as back:
        assert_round_trip(values, back["t"].values)
