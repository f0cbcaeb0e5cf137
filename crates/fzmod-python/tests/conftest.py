"""Shared fixtures: smooth fields like the scientific data fzmod is for, and the bound check
every test applies element by element in float64."""

import numpy
import pytest

DTYPES = [numpy.float32, numpy.float64]


def smooth_field(shape, dtype, seed=0):
    """A smooth field with some noise: sum of sines over the index grid."""
    rng = numpy.random.default_rng(seed)
    grids = numpy.meshgrid(*[numpy.linspace(0, 3 * numpy.pi, n) for n in shape], indexing="ij")
    field = sum(numpy.sin(g * (i + 1)) for i, g in enumerate(grids)) * 50.0
    field += rng.normal(scale=0.5, size=shape)
    return field.astype(dtype)


def assert_within(original, decoded, abs_bound):
    """Every finite element within abs_bound (compared in float64); NaN/Inf bit-identical."""
    original, decoded = numpy.asarray(original), numpy.asarray(decoded)
    assert decoded.shape == original.shape
    assert decoded.dtype == original.dtype
    finite = numpy.isfinite(original)
    error = numpy.abs(original[finite].astype(numpy.float64) - decoded[finite].astype(numpy.float64))
    worst = float(error.max()) if error.size else 0.0
    assert worst <= abs_bound, f"max error {worst} exceeds bound {abs_bound}"
    assert numpy.array_equal(original[~finite].view(numpy.uint8), decoded[~finite].view(numpy.uint8))


@pytest.fixture(params=DTYPES, ids=["f32", "f64"])
def dtype(request):
    return request.param
