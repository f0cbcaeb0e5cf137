"""fzmod as an HDF5 filter for h5py, in the style of hdf5plugin's classes::

    import fzmod.h5, h5py
    with h5py.File("out.h5", "w") as f:
        f.create_dataset("t", data=a, chunks=(64, 64),
                         **fzmod.h5.Fzmod(chunks=(64, 64), dtype=a.dtype, mode="abs", bound=1e-3))

The filter id (400) is from HDF5's range for testing (256-511) and is not registered with
The HDF Group. The plugin itself (crates/fzmod-hdf5) does not link libhdf5, so it cannot ask
HDF5 for the dataset's chunk shape and dtype (``set_local``); this helper writes them into
the filter's ``cd_values`` (layout: crates/fzmod-hdf5/src/params.rs). ``mode="rel"`` is
relative to each chunk's value range.
"""

import struct
from collections.abc import Mapping

import numpy

from . import _hdf5_plugin
from .errors import InvalidArgument

FILTER_ID = 400
CD_LAYOUT_VERSION = 1
# Fixed forever, as in crates/fzmod-hdf5/src/params.rs.
PRESET_IDS = {"cuszp": 0, "cuszp2": 1, "cuszp3-fixed": 2, "cuszp3-plain": 3, "cuszp3-outlier": 4}
_MODE_CODES = {"abs": 0, "rel": 1, "noa": 1}
_DTYPE_CODES = {numpy.dtype("float32"): 8, numpy.dtype("float64"): 9}


class Fzmod(Mapping):
    """Keyword arguments for ``h5py.Group.create_dataset``: ``compression`` (the filter id)
    and ``compression_opts`` (the cd_values), for chunks of ``chunks`` elements of ``dtype``.
    h5py marks the filter optional: a chunk it fails on is stored uncompressed (and reads
    back exactly). Mandatory is not offered: HDF5 1.14 crashes at file close after a
    mandatory filter fails (seen in H5D__flush_all_cb)."""

    filter_id = FILTER_ID

    def __init__(self, chunks, dtype, preset="cuszp2", mode="rel", bound=1e-3):
        _ensure_plugin()
        self.filter_options = cd_values(chunks, dtype, preset, mode, bound)
        self._kwargs = {"compression": FILTER_ID, "compression_opts": self.filter_options}

    def __getitem__(self, key):
        return self._kwargs[key]

    def __iter__(self):
        return iter(self._kwargs)

    def __len__(self):
        return len(self._kwargs)

    def __repr__(self):
        return f"fzmod.h5.Fzmod(filter_id={FILTER_ID}, cd_values={self.filter_options})"


def create_dataset(group, name, data, chunks, preset="cuszp2", mode="rel", bound=1e-3, **kwargs):
    """``group.create_dataset(name, data=data, chunks=chunks, ...)`` with the fzmod filter
    for exactly these chunks and this dtype."""
    data = numpy.asarray(data)
    options = Fzmod(chunks, data.dtype, preset=preset, mode=mode, bound=bound)
    return group.create_dataset(name, data=data, chunks=tuple(chunks), **options, **kwargs)


def cd_values(chunks, dtype, preset, mode, bound):
    """The filter's cd_values (unsigned 32-bit words) for these settings."""
    dtype = numpy.dtype(dtype)
    if dtype not in _DTYPE_CODES:
        raise InvalidArgument(f"the fzmod HDF5 filter takes float32 or float64 datasets, got {dtype}")
    if preset not in PRESET_IDS:
        raise InvalidArgument(f"preset {preset!r} has no HDF5 id (known: {', '.join(PRESET_IDS)})")
    if mode not in _MODE_CODES:
        raise InvalidArgument(f"mode must be abs or rel, got {mode!r}")
    bound = float(bound)
    if not (bound > 0 and bound != float("inf")):
        raise InvalidArgument(f"bound must be a finite number > 0, got {bound}")
    chunks = tuple(int(c) for c in chunks)
    if not 1 <= len(chunks) <= 16 or any(not 1 <= c < 2**32 for c in chunks):
        raise InvalidArgument(f"chunks must be 1 to 16 positive dimensions, got {chunks}")
    low, high = struct.unpack("<II", struct.pack("<d", bound))
    header = (CD_LAYOUT_VERSION, PRESET_IDS[preset], _MODE_CODES[mode], low, high, _DTYPE_CODES[dtype], len(chunks))
    return header + chunks


def _ensure_plugin():
    # A source tree without the built plugin still works when HDF5_PLUGIN_PATH points to it.
    if _hdf5_plugin.available():
        _hdf5_plugin.append_to_h5py()
