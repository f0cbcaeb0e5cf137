"""fzmod.compress / decompress / inspect / presets / report on numpy arrays."""

import threading

import numpy
import pytest
from conftest import assert_within, smooth_field

import fzmod

PRESETS = ["cuszp", "cuszp2", "cuszp3-fixed", "cuszp3-plain", "cuszp3-outlier", "fzgpu", "pfpl", "cusz", "mans", "interp", "interp-fast"]
SHAPES = [(5000,), (70, 90), (9, 33, 17)]


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_round_trip_abs_bound_on_every_element(preset, shape, dtype):
    field = smooth_field(shape, dtype)
    archive = fzmod.compress(field, preset=preset, mode="abs", bound=1e-2)
    assert isinstance(archive, bytes)
    decoded = fzmod.decompress(archive)
    assert_within(field, decoded, 1e-2)
    assert decoded.flags.c_contiguous and decoded.flags.writeable


def test_default_is_rel_1e3_of_the_value_range(dtype):
    field = smooth_field((64, 64), dtype)
    archive = fzmod.compress(field)
    info = fzmod.inspect(archive)
    assert (info["preset"], info["error_mode"], info["error_bound"]) == (fzmod.DEFAULT_PRESET, "rel", 1e-3)
    value_range = float(field.max()) - float(field.min())
    assert info["abs_bound"] == 1e-3 * value_range  # resolved in f64 as value * (max - min)
    assert_within(field, fzmod.decompress(archive), 1e-3 * value_range)


def test_nan_and_inf_come_back_bit_identical(dtype):
    field = smooth_field((2000,), dtype)
    field[[3, 500, 1999]] = [numpy.nan, numpy.inf, -numpy.inf]
    assert_within(field, fzmod.decompress(fzmod.compress(field, mode="abs", bound=1e-3)), 1e-3)


@pytest.mark.parametrize(
    "make_view",
    [
        lambda a: a.T,  # Fortran order
        lambda a: a[::2, 1::3],  # strided
        lambda a: numpy.asfortranarray(a),
        lambda a: a.astype(a.dtype.newbyteorder(">")),  # big-endian
    ],
    ids=["transposed", "strided", "fortran", "big-endian"],
)
def test_any_layout_is_compressed_in_c_order(make_view, dtype):
    view = make_view(smooth_field((40, 60), dtype))
    decoded = fzmod.decompress(fzmod.compress(view, mode="abs", bound=1e-3))
    assert decoded.shape == view.shape and decoded.dtype == numpy.dtype(dtype)
    assert_within(numpy.ascontiguousarray(view, dtype=dtype), decoded, 1e-3)


def test_lists_become_float64():
    decoded = fzmod.decompress(fzmod.compress([[1.0, 2.0], [3.0, 4.5]], mode="abs", bound=1e-6))
    assert decoded.dtype == numpy.float64
    assert_within(numpy.array([[1.0, 2.0], [3.0, 4.5]]), decoded, 1e-6)


@pytest.mark.parametrize("bad", [numpy.arange(10), numpy.ones(4, numpy.float16), numpy.ones(3, numpy.complex64)])
def test_other_dtypes_are_refused_with_their_name(bad):
    with pytest.raises(fzmod.InvalidArgument, match=str(bad.dtype)):
        fzmod.compress(bad)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"preset": "nope"}, "unknown preset"),
        ({"mode": "sideways", "bound": 1e-3}, "unknown error-bound mode"),
        # A mode alone once meant that mode at 1e-3: abs 1e-3 is not the preset's rel 1e-3.
        ({"mode": "abs"}, "without a value"),
        ({"bound": -1.0}, "bound"),
        ({"bound": float("nan")}, "bound"),
        ({"backend": "tpu"}, "backend"),
        ({"pipeline": 42}, "pipeline"),
        ({"pipeline": "[[stage]]\nname = 'x'\ntype = 'NoSuchStage'\n"}, "NoSuchStage"),
    ],
)
def test_bad_arguments_raise_invalid_argument(kwargs, message):
    with pytest.raises(fzmod.InvalidArgument, match=message):
        fzmod.compress(numpy.ones(100, numpy.float32), **kwargs)


def test_empty_and_zero_dimensional_arrays_are_refused():
    with pytest.raises(fzmod.InvalidArgument, match="empty"):
        fzmod.compress(numpy.zeros((0, 3), numpy.float32))
    with pytest.raises(fzmod.InvalidArgument, match="0-d"):
        fzmod.compress(numpy.float32(1.0))


def test_errors_derive_from_builtins():
    assert issubclass(fzmod.InvalidArgument, ValueError)
    assert issubclass(fzmod.CorruptArchive, ValueError)
    assert issubclass(fzmod.BackendUnavailable, RuntimeError)
    assert all(issubclass(e, fzmod.FzmodError) for e in (fzmod.InvalidArgument, fzmod.CorruptArchive))


def test_damaged_archives_raise_corrupt_archive():
    archive = fzmod.compress(smooth_field((3000,), numpy.float32))
    for damaged in [b"", b"not an archive", archive[: len(archive) // 2], archive[:-1]]:
        with pytest.raises(fzmod.CorruptArchive):
            fzmod.decompress(damaged)
    flipped = bytearray(archive)
    for position in range(0, len(flipped), max(1, len(flipped) // 50)):
        flipped[position] ^= 0x5A
        with pytest.raises(fzmod.FzmodError):
            fzmod.decompress(flipped)
        flipped[position] ^= 0x5A
    with pytest.raises(fzmod.InvalidArgument, match="bytes-like"):
        fzmod.decompress(12345)


def test_archive_bytes_in_any_buffer():
    field = smooth_field((500,), numpy.float64)
    archive = fzmod.compress(field, mode="abs", bound=1e-4)
    as_array = numpy.frombuffer(archive, dtype=numpy.uint8)
    for form in [archive, bytearray(archive), memoryview(archive), as_array, as_array.copy()]:
        assert_within(field, fzmod.decompress(form), 1e-4)


def test_decompress_into_out(dtype):
    field = smooth_field((30, 50), dtype)
    archive = fzmod.compress(field, mode="abs", bound=1e-3)
    out = numpy.full((30, 50), -1, dtype=dtype)
    assert fzmod.decompress(archive, out=out) is out
    assert_within(field, out, 1e-3)


def test_out_is_checked(dtype):
    archive = fzmod.compress(smooth_field((30, 50), dtype))
    other = numpy.float64 if dtype == numpy.float32 else numpy.float32
    cases = [
        (numpy.empty((50, 30), dtype), "shape"),
        (numpy.empty((30, 50), other), "dtype"),
        (numpy.empty((50, 30), dtype).T, "C-contiguous"),
        ([0.0] * 1500, "numpy array"),
    ]
    for out, message in cases:
        with pytest.raises(fzmod.InvalidArgument, match=message):
            fzmod.decompress(archive, out=out)
    read_only = numpy.empty((30, 50), dtype)
    read_only.flags.writeable = False
    with pytest.raises(fzmod.InvalidArgument, match="writable"):
        fzmod.decompress(archive, out=read_only)


def test_inspect_describes_the_archive():
    field = smooth_field((20, 30, 40), numpy.float64)
    archive = fzmod.compress(field, preset="cuszp3-outlier", mode="abs", bound=0.5)
    info = fzmod.inspect(archive)
    assert info["dtype"] == "float64" and numpy.dtype(info["dtype"]) == field.dtype
    assert info["shape"] == [20, 30, 40]
    assert (info["preset"], info["error_mode"], info["error_bound"], info["abs_bound"]) == (
        "cuszp3-outlier",
        "abs",
        0.5,
        0.5,
    )
    assert [s["type"] for s in info["stages"]][0] == "Quantizer"
    assert info["compressed_bytes"] == len(archive)
    assert info["original_bytes"] == field.nbytes
    assert info["ratio"] == pytest.approx(field.nbytes / len(archive))
    # The one schema of reported facts, shared with the CLI's `inspect --json`.
    assert set(info) == {
        "format_version", "dtype", "shape", "num_elements", "original_bytes", "compressed_bytes", "ratio",
        "bits_per_value", "preset", "error_mode", "error_bound", "abs_bound", "stored_raw", "stages",
    }
    assert info["num_elements"] == field.size and info["stored_raw"] is False


def test_presets_lists_every_preset_with_a_summary():
    presets = fzmod.presets()
    assert list(presets) == PRESETS
    assert all(isinstance(s, str) and s for s in presets.values())


def test_report_with_archive_or_decoded_array(dtype):
    field = smooth_field((100, 100), dtype)
    archive = fzmod.compress(field, mode="abs", bound=1e-2)
    from_archive = fzmod.report(field, archive)
    from_array = fzmod.report(field, fzmod.decompress(archive))
    assert from_archive["ratio"] == pytest.approx(field.nbytes / len(archive))
    assert from_archive["abs_bound"] == 1e-2 and from_archive["within_bound"] is True
    assert "ratio" not in from_array and from_array["within_bound"] is None  # nothing to judge by
    quality_names = {
        "value_min", "value_max", "max_abs_error", "max_error_index", "psnr_db", "nrmse",
        "special_value_mismatches", "within_bound",
    }
    assert set(from_array) == quality_names and quality_names < set(from_archive)
    for key in ["max_abs_error", "psnr_db", "nrmse", "value_min", "value_max"]:
        assert from_archive[key] == from_array[key]
    assert 0 < from_archive["max_abs_error"] <= 1e-2
    assert from_archive["psnr_db"] > 40
    assert from_archive["special_value_mismatches"] == 0
    assert fzmod.report(field, fzmod.decompress(archive), abs_bound=1e-2)["within_bound"] is True
    assert fzmod.report(field, fzmod.decompress(archive), abs_bound=1e-9)["within_bound"] is False


def test_bound_policy_a_bare_value_is_relative_and_a_bare_mode_keeps_the_presets_bound(dtype):
    field = smooth_field((64, 64), dtype)
    bare_value = fzmod.inspect(fzmod.compress(field, bound=1e-2))
    assert (bare_value["error_mode"], bare_value["error_bound"]) == ("rel", 1e-2)
    bare_mode = fzmod.inspect(fzmod.compress(field, mode="rel"))
    assert (bare_mode["error_mode"], bare_mode["error_bound"]) == ("rel", 1e-3)
    assert fzmod.resolve_bound(mode="abs", bound=0.5) == ("abs", 0.5)
    assert fzmod.resolve_bound() == ("rel", 1e-3)


PIPELINE = {
    "pipeline": {"name": "my-cuszp2"},
    "stage": [
        {"name": "quant", "type": "Quantizer", "error_bound_mode": "abs", "error_bound": 0.25},
        {"name": "lorenzo", "type": "Lorenzo", "block_size": 32, "inputs": [{"from": "quant", "port": "codes"}]},
        {
            "name": "coder",
            "type": "AdaptiveBitpack",
            "block_size": 32,
            "outlier_selection": True,
            "metadata": "packed",
            "inputs": [{"from": "lorenzo"}],
        },
    ],
}


def test_pipeline_dict_keeps_its_own_bound(dtype):
    field = smooth_field((4096,), dtype)
    archive = fzmod.compress(field, pipeline=PIPELINE)
    info = fzmod.inspect(archive)
    assert (info["preset"], info["error_mode"], info["error_bound"]) == ("my-cuszp2", "abs", 0.25)
    assert_within(field, fzmod.decompress(archive), 0.25)


def test_pipeline_text_with_an_explicit_bound(dtype):
    text = fzmod.pipeline_text(PIPELINE)
    assert "[[stage]]" in text
    field = smooth_field((4096,), dtype)
    archive = fzmod.compress(field, pipeline=text, mode="abs", bound=1e-3)
    info = fzmod.inspect(archive)
    assert (info["error_mode"], info["error_bound"]) == ("abs", 1e-3)
    assert_within(field, fzmod.decompress(archive), 1e-3)
    # A value alone is relative, whatever mode the pipeline was written with.
    info = fzmod.inspect(fzmod.compress(field, pipeline=text, bound=1e-3))
    assert (info["error_mode"], info["error_bound"]) == ("rel", 1e-3)
    # The pipeline's own mode without a value keeps its value; another mode is refused.
    assert fzmod.resolve_bound(pipeline=text, mode="abs") == ("abs", 0.25)
    with pytest.raises(fzmod.InvalidArgument, match="without a value"):
        fzmod.compress(field, pipeline=text, mode="rel")


def test_pipeline_dict_with_unwritable_values_is_refused():
    with pytest.raises(fzmod.InvalidArgument, match="cannot be written as TOML"):
        fzmod.compress(numpy.ones(64, numpy.float32), pipeline={"stage": [{"name": object()}]})


def test_same_bytes_every_time_and_every_thread():
    field = smooth_field((256, 256), numpy.float32)
    expected = fzmod.compress(field, backend="cpu")
    results = [None] * 4

    def work(i):
        results[i] = fzmod.compress(field, backend="cpu")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r == expected for r in results)


class FakeCupyArray:
    """Looks like a CuPy array: memory on the device, described by the CUDA interface."""

    def __init__(self, **changes):
        self.__cuda_array_interface__ = {
            "shape": (4, 2),
            "typestr": "<f4",
            "data": (0x7F0000000000, False),
            "strides": None,
            "version": 3,
            "stream": 1,
        }
        self.__cuda_array_interface__.update(changes)


class FakeTorchCudaTensor:
    def __dlpack_device__(self):
        return (2, 0)  # kDLCUDA


GPU_HERE = fzmod.backend("auto")["name"] == "cuda"


@pytest.mark.skipif(GPU_HERE, reason="tests/gpu_check.py covers device arrays where there is a GPU")
@pytest.mark.parametrize("device_array", [FakeCupyArray(), FakeTorchCudaTensor()], ids=["cai", "dlpack"])
def test_device_arrays_without_a_gpu_raise_backend_unavailable(device_array):
    with pytest.raises(fzmod.BackendUnavailable):
        fzmod.compress(device_array)


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"typestr": "<i4"}, "float32 and float64"),
        ({"typestr": ">f4"}, "float32 and float64"),
        ({"strides": (4, 16)}, "C-contiguous"),
        ({"strides": (8,)}, "C-contiguous"),
        ({"shape": (0, 2)}, "empty"),
        ({"shape": ()}, "0-d"),
        ({"data": None}, "malformed"),
        ({"mask": object()}, "masked"),
        ({"stream": 0}, "stream 0"),
    ],
)
def test_device_arrays_are_validated_before_the_gpu_is_touched(changes, message):
    with pytest.raises(fzmod.InvalidArgument, match=message):
        fzmod.compress(FakeCupyArray(**changes))


class RefusingTensor:
    """PyTorch's tensors that require grad raise from the interface property."""

    @property
    def __cuda_array_interface__(self):
        raise RuntimeError("Can't get __cuda_array_interface__ on Variable that requires grad")


def test_a_refusing_interface_is_an_invalid_argument():
    with pytest.raises(fzmod.InvalidArgument, match="requires grad"):
        fzmod.compress(RefusingTensor())


def test_c_contiguous_strides_are_accepted():
    # Explicit C strides, and any stride on a dimension of length 1, describe C order: these
    # get past validation (to the backend, which is missing here or the fake pointer is refused).
    for changes in [{"strides": (8, 4)}, {"shape": (1, 4), "strides": (999, 4)}]:
        with pytest.raises((fzmod.BackendUnavailable, fzmod.InvalidArgument), match="^(?!.*C-contiguous)"):
            fzmod.compress(FakeCupyArray(**changes))


@pytest.mark.skipif(GPU_HERE, reason="tests/gpu_check.py covers device decoding where there is a GPU")
def test_decoding_to_a_device_without_a_gpu_raises_backend_unavailable():
    archive = fzmod.compress(numpy.ones(64, numpy.float32))
    with pytest.raises(fzmod.BackendUnavailable):
        fzmod.decompress(archive, device="cuda")


def test_device_arguments_are_checked():
    archive = fzmod.compress(numpy.ones(64, numpy.float32))
    with pytest.raises(fzmod.InvalidArgument, match="device must be"):
        fzmod.decompress(archive, device="tpu")
    with pytest.raises(fzmod.InvalidArgument, match="out="):
        fzmod.decompress(archive, out=numpy.empty(64, numpy.float32), device="cuda")
    with pytest.raises(fzmod.InvalidArgument, match="CUDA backend"):
        fzmod.decompress(archive, device="cuda", backend="cpu")
    with pytest.raises(fzmod.InvalidArgument, match="CUDA backend"):
        fzmod.compress(FakeCupyArray(), backend="cpu")


def test_backend_reports_where_it_runs():
    auto = fzmod.backend("auto")
    assert auto["name"] in ("cpu", "cuda")
    assert fzmod.backend("cpu") == {"name": "cpu", "note": ""}
    if auto["name"] == "cpu":
        with pytest.raises(fzmod.BackendUnavailable):
            fzmod.compress(numpy.ones(64, numpy.float32), backend="cuda")
