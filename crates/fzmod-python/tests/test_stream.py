"""Streaming compress/decompress over paths and file objects (docs/PYTHON.md, "Streaming")."""

import io

import numpy
import pytest

import fzmod


def _field(dtype=numpy.float32):
    z, y, x = numpy.meshgrid(numpy.arange(20), numpy.arange(30), numpy.arange(40), indexing="ij")
    return (numpy.sin(0.1 * x) * numpy.cos(0.07 * y) + 0.05 * z).astype(dtype)


class _Pipe(io.RawIOBase):
    """A readable stream that cannot seek, handing out a few bytes per read, as a pipe."""

    def __init__(self, data):
        self._data = memoryview(data)

    def readable(self):
        return True

    def readinto(self, buf):
        n = min(len(buf), len(self._data), 1000)
        buf[:n] = self._data[:n]
        self._data = self._data[n:]
        return n


def _bits(a):
    return a.view(numpy.uint32 if a.dtype == numpy.float32 else numpy.uint64)


@pytest.mark.parametrize("dtype", [numpy.float32, numpy.float64])
def test_a_streamed_archive_decodes_like_the_chunked_one(tmp_path, dtype):
    a = _field(dtype)
    raw = tmp_path / "a.raw"
    a.tofile(raw)
    out = tmp_path / "a.fzm"
    # A rel bound from a path: a first pass finds the range, as the in-memory writer does.
    facts = fzmod.compress_stream(raw, out, dtype=a.dtype, shape=a.shape, preset="cuszp2", bound=1e-3, chunk="6x16x40")
    assert facts["format_version"] == "2.1" and facts["shape"] == list(a.shape)
    streamed = out.read_bytes()
    chunked = fzmod.compress(a, "cuszp2", bound=1e-3, backend="cpu", chunk="6x16x40")
    want = fzmod.decompress(chunked, backend="cpu")
    got = fzmod.decompress(streamed, backend="cpu")
    assert numpy.array_equal(_bits(got), _bits(want))
    assert numpy.abs(got.astype("f8") - a).max() <= 1e-3 * (float(a.max()) - float(a.min()))
    region = numpy.s_[3:17, 5:29, 1:40]
    assert numpy.array_equal(_bits(fzmod.decompress(streamed, region=region, backend="cpu")), _bits(want[region]))
    # From a seekable file object (read from its position, sought back), into one: same bytes.
    src = io.BytesIO(b"skip" + a.tobytes())
    src.seek(4)
    dst = io.BytesIO()
    fzmod.compress_stream(src, dst, dtype=a.dtype, shape=a.shape, preset="cuszp2", bound=1e-3, chunk="6x16x40")
    assert dst.getvalue() == streamed


def test_a_pipe_with_a_relative_bound_needs_the_range():
    a = _field()
    with pytest.raises(fzmod.InvalidArgument, match="value range"):
        fzmod.compress_stream(_Pipe(a.tobytes()), io.BytesIO(), dtype="float32", shape=a.shape, bound=1e-3)
    seekable = io.BytesIO()
    fzmod.compress_stream(io.BytesIO(a.tobytes()), seekable, dtype="float32", shape=a.shape, bound=1e-3)
    given = io.BytesIO()
    bounds = (float(a.min()), float(a.max()))
    fzmod.compress_stream(_Pipe(a.tobytes()), given, dtype="float32", shape=a.shape, bound=1e-3, value_range=bounds)
    assert given.getvalue() == seekable.getvalue()
    # An absolute bound needs no range.
    piped = io.BytesIO()
    fzmod.compress_stream(_Pipe(a.tobytes()), piped, dtype="float32", shape=a.shape, mode="abs", bound=1e-3)
    assert numpy.abs(fzmod.decompress(piped.getvalue(), backend="cpu") - a).max() <= 1e-3
    # A range the values leave is refused, not widened.
    with pytest.raises(fzmod.InvalidArgument):
        fzmod.compress_stream(
            io.BytesIO(a.tobytes()), io.BytesIO(), dtype="float32", shape=a.shape, bound=1e-3, value_range=(0, 0.5)
        )


def test_decompress_stream_writes_the_values_of_any_archive(tmp_path):
    a = _field()
    streamed = io.BytesIO()
    fzmod.compress_stream(io.BytesIO(a.tobytes()), streamed, dtype="float32", shape=a.shape, mode="abs", bound=1e-3)
    for archive in [streamed.getvalue(), fzmod.compress(a, "cuszp2", mode="abs", bound=1e-3, backend="cpu")]:
        want = fzmod.decompress(archive, backend="cpu").tobytes()
        out = io.BytesIO()
        facts = fzmod.decompress_stream(_Pipe(archive), out, backend="cpu")
        assert facts == {"dtype": "float32", "shape": [20, 30, 40]}
        assert out.getvalue() == want
        (tmp_path / "a.fzm").write_bytes(archive)
        fzmod.decompress_stream(tmp_path / "a.fzm", tmp_path / "a.raw", backend="cpu")
        assert (tmp_path / "a.raw").read_bytes() == want


def test_cut_inputs_and_bad_arguments_raise_and_leave_no_output(tmp_path):
    a = _field()
    out = tmp_path / "cut.fzm"
    with pytest.raises(fzmod.FzmodError):
        fzmod.compress_stream(io.BytesIO(a.tobytes()[:-8]), out, dtype="float32", shape=a.shape, mode="abs", bound=1)
    assert not out.exists()
    archive = io.BytesIO()
    fzmod.compress_stream(io.BytesIO(a.tobytes()), archive, dtype="float32", shape=a.shape, mode="abs", bound=1e-3)
    data = archive.getvalue()
    for cut in [10, len(data) // 2, len(data) - 1]:
        with pytest.raises(fzmod.CorruptArchive):
            fzmod.decompress_stream(io.BytesIO(data[:cut]), tmp_path / "x.raw", backend="cpu")
        assert not (tmp_path / "x.raw").exists()
    for bad in [dict(dtype="int32", shape=a.shape), dict(dtype="float32", shape=(0, 3)), dict(dtype="f4", shape=())]:
        with pytest.raises(fzmod.InvalidArgument):
            fzmod.compress_stream(io.BytesIO(a.tobytes()), io.BytesIO(), mode="abs", bound=1, **bad)
    with pytest.raises(fzmod.InvalidArgument):
        fzmod.compress_stream(42, io.BytesIO(), dtype="float32", shape=a.shape, mode="abs", bound=1)
