"""Every path of docs/PYTHON.md on one field, as a smoke test of an installed wheel:
numpy, numcodecs / Zarr v2, Zarr v3 in sharding (and a fresh process that opens it without
importing fzmod), Dask (threads and processes), HDF5. Bound checked on every element.

    python all_paths.py data/navy_uwnd_132x73x144.f32     (needs zarr, numcodecs, dask, h5py)
"""


def main():
    import os, sys, tempfile
    import numpy, fzmod
    field = os.path.abspath(sys.argv[1])  # before the chdir: a relative path names the caller's folder
    os.chdir(tempfile.mkdtemp())
    a = numpy.fromfile(field, dtype=numpy.float32).reshape(132, 73, 144)
    def check(name, b, bound):
        err = numpy.abs(b.astype("f8") - a.astype("f8")).max()
        print(f"{name:38s} shape={b.shape} dtype={b.dtype} max_err={err:.3e} bound={bound:g} ok={err <= bound}")
        assert err <= bound

    data = fzmod.compress(a, preset="cuszp2", mode="abs", bound=0.01)
    check("numpy compress/decompress", fzmod.decompress(data), 0.01)
    r = fzmod.report(a, data); print(f"  report: ratio={r['ratio']:.2f} psnr={r['psnr_db']:.1f} dB")

    import zarr
    from fzmod.numcodecs import Fzmod
    z = zarr.create_array(store="t.zarr", shape=a.shape, chunks=(66, 73, 72), dtype=a.dtype,
                          zarr_format=2, compressors=Fzmod(preset="cuszp2", mode="abs", bound=0.01))
    z[:] = a
    check("numcodecs / Zarr v2", zarr.open_array("t.zarr", mode="r")[:], 0.01)

    from fzmod.zarr import FzmodCodec
    z = zarr.create_array(store="v3.zarr", shape=a.shape, dtype=a.dtype, chunks=(33, 73, 72), shards=(66, 73, 144),
                          serializer=FzmodCodec(preset="cuszp3-plain", mode="abs", bound=0.01), compressors=None)
    z[:] = a
    check("Zarr v3 serializer in sharding", zarr.open_array("v3.zarr", mode="r")[:], 0.01)
    import subprocess
    out = subprocess.run([sys.executable, "-c", "import sys, zarr; a = zarr.open_array('v3.zarr', mode='r')[:]; "
                          "print('fresh process without import fzmod:', a.shape, a.dtype, 'fzmod imported by entry point:', 'fzmod' in sys.modules)"],
                         capture_output=True, text=True, check=True).stdout
    print("  " + out.strip())

    import dask, dask.array as da
    x = da.from_zarr("v3.zarr")
    print("  dask mean over axis 0 (first 3):", x.mean(axis=0).compute()[0, :3])
    for scheduler in ["threads", "processes"]:
        target = zarr.create_array(store=f"out-{scheduler}.zarr", shape=x.shape, chunks=(33, 73, 72), dtype=x.dtype,
                                   serializer=FzmodCodec(mode="abs", bound=0.01), compressors=None)
        with dask.config.set(scheduler=scheduler, num_workers=2):
            x.to_zarr(target)
        check(f"Dask to_zarr ({scheduler})", zarr.open_array(f"out-{scheduler}.zarr", mode="r")[:], 0.02)

    import h5py, fzmod.h5
    with h5py.File("t.h5", "w") as f:
        fzmod.h5.create_dataset(f, "uwnd", a, chunks=(33, 73, 72), mode="abs", bound=0.01)
    with h5py.File("t.h5", "r") as f:
        check("HDF5 filter via h5py", f["uwnd"][:], 0.01)
    print("  HDF5 file", os.path.getsize("t.h5"), "bytes for", a.nbytes, "bytes of data")


if __name__ == "__main__":  # the processes scheduler re-imports this file
    main()
