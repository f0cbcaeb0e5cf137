"""The smoke test of docs/PYTHON.md, run as the docs show it: from the repository root with a
relative path to the field (the script works in a temporary folder of its own)."""

import os
import subprocess
import sys

import numpy
from conftest import smooth_field

EXAMPLE = os.path.join(os.path.dirname(__file__), os.pardir, "examples", "all_paths.py")


def test_all_paths_takes_a_path_relative_to_the_caller(tmp_path):
    (tmp_path / "data").mkdir()
    smooth_field((132, 73, 144), numpy.float32).tofile(tmp_path / "data" / "field.f32")
    run = subprocess.run([sys.executable, os.path.abspath(EXAMPLE), "data/field.f32"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    assert "HDF5 filter via h5py" in run.stdout and "ok=False" not in run.stdout


DOCS = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, os.pardir, "docs", "PYTHON.md")


def test_the_dask_block_of_the_docs_runs_as_a_script(tmp_path):
    # Pasted as a script, the processes scheduler re-imports it in every worker: without a
    # `__main__` guard the pool broke (BrokenProcessPool).
    import zarr

    from fzmod.zarr import FzmodCodec

    text = open(DOCS, encoding="utf-8").read()
    block = text.split("\n## Dask\n", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    (tmp_path / "dask_example.py").write_text(block)
    field = smooth_field((66, 73, 72), numpy.float32)
    z = zarr.create_array(store=str(tmp_path / "v3.zarr"), shape=field.shape, chunks=(33, 73, 72),
                          dtype=field.dtype, serializer=FzmodCodec(mode="abs", bound=0.01), compressors=None)
    z[:] = field
    run = subprocess.run([sys.executable, "dask_example.py"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    out = zarr.open_array(str(tmp_path / "out.zarr"), mode="r")[:]
    assert numpy.abs(out.astype("f8") - 2 * zarr.open_array(str(tmp_path / "v3.zarr"), mode="r")[:]).max() <= 0.01
