"""Dask over fzmod-compressed Zarr arrays: read, reduce, and write with the codec on several
workers (threads and processes: the codecs pickle)."""

import dask
import dask.array as da
import numpy
import pytest
import zarr
from conftest import assert_within, smooth_field

from fzmod.numcodecs import Fzmod
from fzmod.zarr import FzmodCodec

BOUND = 1e-2


@pytest.fixture
def stored(tmp_path, dtype):
    field = smooth_field((120, 160), dtype)
    path = str(tmp_path / "in.zarr")
    array = zarr.create_array(
        store=path, shape=field.shape, chunks=(40, 40), dtype=dtype,
        serializer=FzmodCodec(mode="abs", bound=BOUND), compressors=None,
    )
    array[:] = field
    return path, field


@pytest.mark.parametrize("scheduler", ["threads", "processes"])
def test_reduction_over_a_compressed_array(stored, scheduler):
    path, field = stored
    lazy = da.from_zarr(path)
    assert lazy.chunksize == (40, 40)
    with dask.config.set(scheduler=scheduler, num_workers=2):
        mean_per_row = lazy.mean(axis=1).compute()
        decoded = lazy.compute()
    assert_within(field, decoded, BOUND)
    # The reduction over the compressed chunks is, bit for bit, the same reduction over the
    # decoded array in the same chunks; each mean is therefore within the bound of the true
    # mean, because every decoded element is (checked above, exactly).
    with dask.config.set(scheduler=scheduler, num_workers=2):
        reference = da.from_array(decoded, chunks=lazy.chunksize).mean(axis=1).compute()
    assert numpy.array_equal(mean_per_row, reference)


@pytest.mark.parametrize("scheduler", ["threads", "processes"])
def test_to_zarr_with_the_v3_codec(tmp_path, scheduler, dtype):
    field = smooth_field((96, 128), dtype)
    source = da.from_array(field, chunks=(32, 64))
    path = str(tmp_path / f"out-{scheduler}.zarr")
    target = zarr.create_array(
        store=path, shape=field.shape, chunks=(32, 64), dtype=dtype,
        serializer=FzmodCodec(preset="cuszp3-plain", mode="abs", bound=BOUND), compressors=None,
    )
    with dask.config.set(scheduler=scheduler, num_workers=2):
        (source * 2).to_zarr(target)
    assert_within(field * 2, zarr.open_array(path, mode="r")[:], BOUND)


@pytest.mark.parametrize("scheduler", ["threads", "processes"])
def test_to_zarr_v2_format_with_the_numcodecs_codec(tmp_path, scheduler):
    field = smooth_field((64, 64), numpy.float64)
    path = str(tmp_path / f"v2-{scheduler}.zarr")
    target = zarr.create_array(
        store=path, shape=field.shape, chunks=(32, 32), dtype=field.dtype, zarr_format=2,
        compressors=Fzmod(mode="abs", bound=BOUND),
    )
    with dask.config.set(scheduler=scheduler, num_workers=2):
        da.from_array(field, chunks=(32, 32)).to_zarr(target)
    assert_within(field, da.from_zarr(path).compute(scheduler="threads"), BOUND)
