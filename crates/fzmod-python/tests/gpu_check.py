"""GPU checks of an installed fzmod wheel, for a machine with a GPU, numpy, CuPy and PyTorch
(no pytest, zarr or numcodecs needed). scripts/gpu-check.sh runs it:

    python3 -m pip install -q --no-index --no-deps --target /tmp/fzpy .gpu/wheels/*.whl
    PYTHONPATH=/tmp/fzpy python3 crates/fzmod-python/tests/gpu_check.py

Not collected by pytest (its name is not test_*.py). Prints one line per check, timings of a
37 MB array on the host and device paths, and "N passed, N failed"; exits 1 on any failure.
The reference everywhere is the CPU backend on numpy arrays: device paths must write the
same archive bytes and decode the same values, bit for bit.
"""

import sys
import time
import traceback

import numpy

import fzmod

RESULTS = []


def check(name):
    def run(function):
        try:
            detail = function()
            RESULTS.append(True)
            print(f"ok    {name}" + (f": {detail}" if detail else ""))
        except Exception:
            RESULTS.append(False)
            print(f"FAIL  {name}")
            traceback.print_exc(file=sys.stdout)
        return function

    return run


def smooth_field(shape, dtype, seed=0):
    """A smooth field with some noise (as tests/conftest.py), plus a NaN and an Inf."""
    rng = numpy.random.default_rng(seed)
    grids = numpy.meshgrid(*[numpy.linspace(0, 3 * numpy.pi, n) for n in shape], indexing="ij")
    field = sum(numpy.sin(g * (i + 1)) for i, g in enumerate(grids)) * 50.0
    field += rng.normal(scale=0.5, size=shape)
    field = field.astype(dtype)
    field.flat[7], field.flat[11] = numpy.nan, numpy.inf
    return field


def bits(array):
    array = numpy.ascontiguousarray(array)
    return array.view(numpy.uint32 if array.dtype == numpy.float32 else numpy.uint64)


def assert_within(original, decoded, abs_bound):
    """Every finite element within abs_bound (in float64); NaN and Inf bit-identical."""
    assert decoded.shape == original.shape and decoded.dtype == original.dtype, (decoded.shape, decoded.dtype)
    finite = numpy.isfinite(original)
    error = numpy.abs(original[finite].astype(numpy.float64) - decoded[finite].astype(numpy.float64))
    assert error.max() <= abs_bound, f"max error {error.max()} > {abs_bound}"
    assert numpy.array_equal(bits(original[~finite]), bits(decoded[~finite]))
    return f"max error {error.max():.3g} <= {abs_bound}"


def expect_error(kind, call):
    try:
        call()
    except kind as e:
        return f"{type(e).__name__}: {e}"
    raise AssertionError(f"expected {kind.__name__}")


import cupy  # noqa: E402  (after the helpers: the import error, if any, is the first line out)
import torch  # noqa: E402

SHAPE = (300, 500)
SETTINGS = [
    {"preset": "cuszp2", "mode": "abs", "bound": 1e-2},
    {"preset": "cuszp2", "mode": "rel", "bound": 1e-3},
    {"preset": "cuszp3-plain", "mode": "abs", "bound": 1e-2},
]


@check("the CUDA backend is selected")
def _():
    where = fzmod.backend("auto")
    assert where["name"] == "cuda", where
    return f"{where}, fzmod {fzmod.__version__}, cupy {cupy.__version__}, torch {torch.__version__}"


for dtype in (numpy.float32, numpy.float64):
    host = smooth_field(SHAPE, dtype)
    for settings in SETTINGS:
        label = f"{numpy.dtype(dtype).name} {settings}"

        @check(f"CuPy {label}: device compress == CPU bytes")
        def _():
            reference = fzmod.compress(host, backend="cpu", **settings)
            archive = fzmod.compress(cupy.asarray(host), **settings)
            assert archive == reference, f"{len(archive)} vs {len(reference)} bytes"
            return f"{len(archive)} bytes"

    archive = fzmod.compress(host, backend="cpu", mode="abs", bound=1e-2)

    @check(f"{numpy.dtype(dtype).name}: decompress(device='cuda') is CuPy, == CPU decode bit for bit, bound holds")
    def _():
        on_device = fzmod.decompress(archive, device="cuda")
        assert isinstance(on_device, cupy.ndarray), type(on_device)
        reference = fzmod.decompress(archive, backend="cpu")
        decoded = cupy.asnumpy(on_device)
        assert numpy.array_equal(bits(decoded), bits(reference))
        return assert_within(host, decoded, 1e-2)

host32 = smooth_field(SHAPE, numpy.float32, seed=1)
reference32 = fzmod.compress(host32, backend="cpu")


@check("torch float32 CUDA tensor: device compress == CPU bytes")
def _():
    assert fzmod.compress(torch.from_numpy(host32).cuda()) == reference32


@check("torch tensor written on a side stream is waited for")
def _():
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        tensor = torch.zeros(SHAPE, dtype=torch.float32, device="cuda")
        for _ in range(50):  # long enough to be running still when compress starts
            tensor.mul_(1.0)
        tensor.copy_(torch.from_numpy(host32).cuda(non_blocking=False))
    assert fzmod.compress(tensor) == reference32


@check("CuPy array written on a non-blocking stream is waited for (interface v3 stream)")
def _():
    with cupy.cuda.Stream(non_blocking=True) as stream:
        array = cupy.asarray(host32) * cupy.float32(1.0)
        for _ in range(50):
            array *= cupy.float32(1.0)
        interface = array.__cuda_array_interface__
        assert interface.get("stream") == stream.ptr, interface.get("stream")
        archive = fzmod.compress(array)
    # The device's multiplies turn the field's NaN into the canonical NaN (0x7fffffff), so the
    # reference is the CPU archive of the values the device holds, not of host32.
    assert archive == fzmod.compress(cupy.asnumpy(array), backend="cpu")


@check("DLPack-only producer (read through cupy.from_dlpack)")
def _():
    tensor = torch.from_numpy(host32).cuda()

    class DLPackOnly:
        def __dlpack__(self, **kwargs):
            return tensor.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return tensor.__dlpack_device__()

    assert fzmod.compress(DLPackOnly()) == reference32


@check("the raw DeviceArray (no CuPy needed) is a valid __cuda_array_interface__ for torch")
def _():
    owner = fzmod._native.decompress_device(numpy.frombuffer(reference32, numpy.uint8), "auto")
    interface = owner.__cuda_array_interface__
    assert interface["version"] == 3 and interface["typestr"] == "<f4" and interface["shape"] == SHAPE
    assert interface["strides"] is None and interface["stream"] is None and interface["data"][1] is False
    viewed = torch.as_tensor(owner, device="cuda")
    assert viewed.data_ptr() == interface["data"][0], "torch copied instead of viewing"
    expected = fzmod.decompress(reference32, backend="cpu")
    assert numpy.array_equal(bits(viewed.cpu().numpy()), bits(expected))
    return repr(owner)


@check("the CuPy view keeps the decoded buffer alive")
def _():
    on_device = fzmod.decompress(reference32, device="cuda")
    expected = fzmod.decompress(reference32, backend="cpu")
    import gc

    gc.collect()
    churn = [cupy.ones(SHAPE, cupy.float32) * 7 for _ in range(20)]  # would reuse freed memory
    assert numpy.array_equal(bits(cupy.asnumpy(on_device)), bits(expected))
    del churn


base = cupy.asarray(smooth_field((64, 64), numpy.float32))
refusals = {
    "non-contiguous CuPy view (x[:, ::2])": (fzmod.InvalidArgument, lambda: fzmod.compress(base[:, ::2])),
    "Fortran-order CuPy array": (fzmod.InvalidArgument, lambda: fzmod.compress(cupy.asfortranarray(base))),
    "transposed torch tensor": (fzmod.InvalidArgument, lambda: fzmod.compress(torch.ones(8, 4, device="cuda").T)),
    "CuPy int32": (fzmod.InvalidArgument, lambda: fzmod.compress(cupy.ones(64, cupy.int32))),
    "CuPy float16": (fzmod.InvalidArgument, lambda: fzmod.compress(cupy.ones(64, cupy.float16))),
    "torch float16": (fzmod.InvalidArgument, lambda: fzmod.compress(torch.ones(64, device="cuda").half())),
    "torch tensor requiring grad": (
        fzmod.InvalidArgument,
        lambda: fzmod.compress(torch.ones(64, device="cuda", requires_grad=True)),
    ),
    "empty CuPy array": (fzmod.InvalidArgument, lambda: fzmod.compress(cupy.ones((0, 4), cupy.float32))),
    "device array with backend='cpu'": (fzmod.InvalidArgument, lambda: fzmod.compress(base, backend="cpu")),
    "truncated archive to the device": (
        fzmod.CorruptArchive,
        lambda: fzmod.decompress(reference32[: len(reference32) // 2], device="cuda"),
    ),
}
for what, (kind, call) in refusals.items():
    check(f"{what} raises {kind.__name__}")(lambda kind=kind, call=call: expect_error(kind, call))


def best_ms(call, runs=5):
    call()
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        call()
        cupy.cuda.runtime.deviceSynchronize()
        best = min(best, time.perf_counter() - start)
    return best * 1e3


@check("timing, 37 MB float32 (2161x4320), cuszp2 rel 1e-3, fastest of 5")
def _():
    field = smooth_field((2161, 4320), numpy.float32, seed=2)
    on_device = cupy.asarray(field)
    archive = fzmod.compress(field, backend="cpu")
    assert fzmod.compress(on_device) == archive
    assert numpy.array_equal(bits(cupy.asnumpy(fzmod.decompress(archive, device="cuda"))),
                             bits(fzmod.decompress(archive, backend="cpu")))
    mb = field.nbytes / 1e6
    rows = [
        ("compress numpy, cpu backend", lambda: fzmod.compress(field, backend="cpu")),
        ("compress numpy, cuda backend (host path)", lambda: fzmod.compress(field, backend="cuda")),
        ("compress CuPy (device path)", lambda: fzmod.compress(on_device)),
        ("decompress to numpy, cpu backend", lambda: fzmod.decompress(archive, backend="cpu")),
        ("decompress to numpy, cuda backend (host path)", lambda: fzmod.decompress(archive, backend="cuda")),
        ("decompress to CuPy (device path)", lambda: fzmod.decompress(archive, device="cuda")),
        ("host path + upload: cupy.asarray(decompress(...))",
         lambda: cupy.asarray(fzmod.decompress(archive, backend="cuda"))),
    ]
    for name, call in rows:
        ms = best_ms(call)
        print(f"      {name:<52}{ms:9.2f} ms {mb / ms:8.2f} GB/s")
    return f"{mb:.1f} MB, ratio {field.nbytes / len(archive):.2f}"


failed = RESULTS.count(False)
print(f"gpu_check: {RESULTS.count(True)} passed, {failed} failed")
sys.exit(1 if failed else 0)
