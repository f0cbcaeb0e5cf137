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
