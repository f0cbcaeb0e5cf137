"""Encodings for xarray's ``to_zarr`` / ``to_netcdf`` that keep a bound meaningful for a whole
variable.

A ``rel`` bound is relative to the value range of what is compressed: for a codec, of each
chunk, and with every value of it, a CF ``_FillValue`` (often 1e20) included. One chunk with a
fill value then has a range of ~1e20 and its real values come back far off, yet "within the
bound". ``encoding`` turns a relative bound into an absolute one per variable, from the
variable's global valid range (fill values, ``missing_value`` and NaN/±Inf left out), and
returns the ``encoding`` dict for xarray::

    ds.to_zarr("out.zarr", encoding=fzmod.xarray.encoding(ds, rel=1e-3))
    ds.to_netcdf("out.nc", engine="h5netcdf", encoding=fzmod.xarray.encoding(ds, rel=1e-3, engine="h5netcdf"))

xarray is not imported: the dataset only needs ``data_vars`` (name -> variable with ``data``,
``dtype``, ``attrs`` and ``encoding``), and the data may be numpy or Dask arrays (the ranges
of all variables are then computed in one Dask pass).
"""

from __future__ import annotations

import warnings
from typing import Any, Dict, Iterable, Optional, Tuple

import numpy

import fzmod

_FLOAT_DTYPES = (numpy.dtype("float32"), numpy.dtype("float64"))
_ENGINES = ("zarr", "h5netcdf", "netcdf4")


def fill_values(variable: Any) -> Tuple[float, ...]:
    """The CF fill and missing values of an xarray variable (``encoding`` first: xarray moves
    ``_FillValue`` there when it decodes a file; ``attrs`` for a dataset built in memory)."""
    found = []
    for source in (getattr(variable, "encoding", None) or {}, getattr(variable, "attrs", None) or {}):
        for key in ("_FillValue", "missing_value"):
            value = source.get(key)
            if value is not None:
                found.extend(float(v) for v in numpy.atleast_1d(value))
    return tuple(found)


def valid_range(data: Any, fills: Iterable[float] = ()) -> Tuple[Optional[float], Optional[float]]:
    """``(min, max)`` of the finite values of a numpy or Dask array that are not one of
    ``fills``; ``(None, None)`` when there is none."""
    return _compute([_range_of(data, tuple(fills))])[0]


def abs_bounds(dataset: Any, rel: float = 1e-3, variables: Optional[Iterable[str]] = None) -> Dict[str, float]:
    """``{name: rel * (valid max - valid min)}`` for every float32/float64 data variable (or
    those named): the absolute bound a relative one means for the whole variable. Variables
    with no valid values or a constant value are left out (no positive bound exists)."""
    rel = float(rel)
    if not (rel > 0 and numpy.isfinite(rel)):
        raise fzmod.InvalidArgument(f"rel must be a finite number > 0, got {rel}")
    names = [n for n in (variables if variables is not None else dataset.data_vars) if _is_float(dataset.data_vars[n])]
    ranges = _compute([_range_of(dataset.data_vars[n].data, fill_values(dataset.data_vars[n])) for n in names])
    return {n: rel * (hi - lo) for n, (lo, hi) in zip(names, ranges) if lo is not None and hi > lo}


def encoding(
    dataset: Any,
    rel: float = 1e-3,
    *,
    engine: str = "zarr",
    zarr_format: int = 3,
    preset: Optional[str] = None,
    variables: Optional[Iterable[str]] = None,
) -> Dict[str, Dict[str, Any]]:
    """The ``encoding`` argument of ``to_zarr`` (``engine="zarr"``, Zarr format 3: the Zarr v3
    serializer; 2: the numcodecs codec) or ``to_netcdf`` (``engine="h5netcdf"`` or
    ``"netcdf4"``: the HDF5 filter) compressing each float variable with fzmod at the absolute
    bound ``abs_bounds`` gives it. Merge it with your own per-variable settings (chunks)."""
    if engine not in _ENGINES:
        raise fzmod.InvalidArgument(f"engine must be one of {', '.join(_ENGINES)}, got {engine!r}")
    if engine == "zarr" and zarr_format not in (2, 3):
        raise fzmod.InvalidArgument(f"zarr_format must be 2 or 3, got {zarr_format!r}")
    result = {}
    for name, bound in abs_bounds(dataset, rel, variables).items():
        # The CF fill value (the first of _FillValue / missing_value) and NaN are masked: the
        # fill costs run lengths, not one outlier per point.
        fills = fill_values(dataset.data_vars[name])
        mask = {"mask_nan": True, "fill_value": fills[0] if fills else None}
        if engine == "zarr" and zarr_format == 3:
            from .zarr import FzmodCodec

            codec = FzmodCodec(preset=preset, mode="abs", bound=bound, **mask)
            result[name] = {"serializer": codec, "compressors": None}
        elif engine == "zarr":
            from .numcodecs import Fzmod

            result[name] = {"compressors": [Fzmod(preset=preset, mode="abs", bound=bound, **mask)]}
        else:
            from .h5 import FILTER_ID, cd_values

            opts = cd_values(preset, "abs", bound, **mask)
            result[name] = {"compression": FILTER_ID, "compression_opts": opts}
    return result


def _is_float(variable):
    # A variable packed to integers on write (CF scale_factor/add_offset) is not stored as
    # floats, so the float codecs cannot take it.
    packed = (getattr(variable, "encoding", None) or {}).get("dtype")
    return numpy.dtype(variable.dtype) in _FLOAT_DTYPES and (packed is None or numpy.dtype(packed) in _FLOAT_DTYPES)


def _is_dask(data):
    return type(data).__module__.split(".")[0] == "dask"


def _range_of(data, fills):
    """The (lazy, for Dask) min and max of the valid values, NaN where there is none."""
    xp = numpy
    if _is_dask(data):
        import dask.array as xp
    else:
        data = numpy.asarray(data)
    valid = xp.isfinite(data)
    for fill in fills:
        # In the data's own type: a float32 1e20 is not the float64 1e20.
        valid &= data != numpy.asarray(fill).astype(data.dtype)
    masked = xp.where(valid, data, numpy.nan)
    if masked.size == 0:
        return numpy.nan, numpy.nan
    with warnings.catch_warnings():  # an all-NaN array is an answer here (no valid value)
        warnings.simplefilter("ignore", RuntimeWarning)
        return xp.nanmin(masked), xp.nanmax(masked)


def _compute(ranges):
    lazy = [r for pair in ranges for r in pair if _is_dask(r)]
    if lazy:
        import dask

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            done = iter(dask.compute(*lazy))
        ranges = [tuple(next(done) if _is_dask(r) else r for r in pair) for pair in ranges]
    return [tuple(None if numpy.isnan(v) else float(v) for v in pair) for pair in ranges]
