"""Make the HDF5 filter plugin shipped in this package (hdf5_plugin/libh5fzmod.so) visible
to HDF5, so h5py reads and writes fzmod-filtered datasets after ``import fzmod``.

HDF5 reads ``HDF5_PLUGIN_PATH`` once, when the library initialises (at ``import h5py``):
before that, extending the variable is enough and also reaches child processes; after it,
the directory is appended to the live search path with ``h5py.h5pl.append``.
"""

import os
import sys

PLUGIN_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hdf5_plugin")
PLUGIN_FILE = os.path.join(PLUGIN_DIR, "libh5fzmod.so")
# HDF5's built-in search directory on Unix; kept, since setting the variable replaces it.
_HDF5_DEFAULT_PLUGIN_DIR = "/usr/local/hdf5/lib/plugin"


def available():
    """True when this installation carries the plugin (wheels do; a source tree may not)."""
    return os.path.isfile(PLUGIN_FILE)


def make_discoverable():
    """Add the plugin directory to HDF5's search path (no-op without the plugin)."""
    if not available():
        return
    if "h5py" in sys.modules:
        append_to_h5py()
        return
    current = os.environ.get("HDF5_PLUGIN_PATH")
    if current is None:
        os.environ["HDF5_PLUGIN_PATH"] = os.pathsep.join([PLUGIN_DIR, _HDF5_DEFAULT_PLUGIN_DIR])
    elif PLUGIN_DIR not in current.split(os.pathsep):
        os.environ["HDF5_PLUGIN_PATH"] = os.pathsep.join([current, PLUGIN_DIR])


def append_to_h5py():
    """Append the plugin directory to the search path of the HDF5 that h5py has loaded."""
    from h5py import h5pl

    wanted = PLUGIN_DIR.encode()
    if wanted not in (h5pl.get(i) for i in range(h5pl.size())):
        h5pl.append(wanted)
