"""Chunked archives and region decode from Python (docs/FORMAT.md §8)."""

import numpy
import pytest

import fzmod


def _field():
    z, y, x = numpy.meshgrid(numpy.arange(12), numpy.arange(40), numpy.arange(50), indexing="ij")
    return (numpy.sin(0.1 * x) * numpy.cos(0.07 * y) + 0.01 * z).astype(numpy.float32)


@pytest.mark.parametrize("chunk", [None, "5x16x20", "auto"])
def test_region_equals_the_slice_of_the_full_decode(chunk):
    data = _field()
    archive = fzmod.compress(data, "cuszp2", bound=1e-3, backend="cpu", chunk=chunk)
    full = fzmod.decompress(archive, backend="cpu")
    assert numpy.abs(full - data).max() <= 1e-3 * (data.max() - data.min())
    for region in ["2:7,0:40,13:44", numpy.s_[11, 39:, :], numpy.s_[:, 3:4, -5:]]:
        got = fzmod.decompress(archive, region=region, backend="cpu")
        want = full[_as_slices(region)]
        assert got.shape == want.shape
        assert numpy.array_equal(got.view(numpy.uint32), want.view(numpy.uint32))
    if chunk is not None:
        assert fzmod.inspect(archive)["format_version"] == "2.0"


def _as_slices(region):
    if isinstance(region, str):
        return tuple(slice(*map(int, item.split(":"))) for item in region.split(","))
    return tuple(slice(r, r + 1) if isinstance(r, int) else r for r in region)


def test_bad_regions_are_refused():
    archive = fzmod.compress(_field(), "cuszp2", bound=1e-3, backend="cpu", chunk="6x20x25")
    for region in ["0:1,0:1", "0:13,0:1,0:1", "3:3,0:1,0:1", numpy.s_[0:4:2, :, :]]:
        with pytest.raises(fzmod.InvalidArgument):
            fzmod.decompress(archive, region=region, backend="cpu")
