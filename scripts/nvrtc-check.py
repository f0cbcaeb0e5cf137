"""Compile a kernel source the way backend/cuda/compile.rs does, without a GPU: NVRTC to PTX
(the same options), then ptxas for the register, shared-memory and spill report.

  pip install nvidia-cuda-nvrtc-cu12 nvidia-cuda-nvcc-cu12 nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm
  python scripts/nvrtc-check.py --define 'PRED 1' --define 'BLOCK 32u' ... FILE.cu ...

The files are joined in order after the defines and common.cu (Program::source). Exit status 1
with NVRTC's log when the source does not compile. A development check only: the device compiles
its own CUBIN with its own NVRTC.
"""
import argparse, ctypes, os, pathlib, subprocess, sys, tempfile

import nvidia.cuda_nvrtc, nvidia.cuda_nvcc

ap = argparse.ArgumentParser()
ap.add_argument("--define", action="append", default=[], help="'NAME VALUE'")
ap.add_argument("--arch", default="sm_90")
ap.add_argument("--ptx", help="write the PTX here (two sources that give the same PTX compile alike: a check for "
                "device refactors made without a GPU)")
ap.add_argument("--sass", help="write the SASS here (needs cuobjdump: pip install nvidia-cuda-cuobjdump)")
ap.add_argument("files", nargs="+")
a = ap.parse_args()
root = pathlib.Path(__file__).resolve().parent.parent
common = (root / "crates/fzmod/src/backend/cuda/common.cu").read_text()
defines = "".join(f"#define {d}\n" for d in a.define)
source = defines + "\n" + common + "\n" + "".join(pathlib.Path(f).read_text() for f in a.files)

lib = ctypes.CDLL(str(pathlib.Path(nvidia.cuda_nvrtc.__path__[0]) / "lib/libnvrtc.so.12"))
prog = ctypes.c_void_p()
assert lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"check.cu", 0, None, None) == 0
opts = ["--fmad=false", "--ftz=false", "--prec-div=true", "--prec-sqrt=true", "-std=c++17",
        f"--gpu-architecture=compute_{a.arch[3:]}"]
rc = lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts]))
size = ctypes.c_size_t()
lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
log = ctypes.create_string_buffer(size.value)
lib.nvrtcGetProgramLog(prog, log)
if rc != 0:
    print(log.value.decode(), file=sys.stderr)
    sys.exit(1)
lib.nvrtcGetPTXSize(prog, ctypes.byref(size))
ptx = ctypes.create_string_buffer(size.value)
lib.nvrtcGetPTX(prog, ptx)
with tempfile.TemporaryDirectory() as d:
    p = pathlib.Path(d, "k.ptx")
    p.write_bytes(ptx.value)
    if a.ptx:
        pathlib.Path(a.ptx).write_bytes(ptx.value)
    ptxas = pathlib.Path(nvidia.cuda_nvcc.__path__[0]) / "bin/ptxas"
    r = subprocess.run([str(ptxas), "-v", f"-arch={a.arch}", str(p), "-o", str(pathlib.Path(d, "k.cubin"))],
                       capture_output=True, text=True)
    print(r.stdout + r.stderr)
    if r.returncode == 0 and a.sass:
        import shutil
        tool = shutil.which("cuobjdump") or next(pathlib.Path(sys.prefix).rglob("bin/cuobjdump"))
        # cuobjdump calls nvdisasm (pip install nvidia-cuda-nvdisasm), which lands beside it.
        env = dict(os.environ, PATH=f"{pathlib.Path(tool).parent}:{os.environ.get('PATH', '')}")
        for nvdisasm in pathlib.Path(sys.prefix).rglob("bin/nvdisasm"):
            env["PATH"] = f"{nvdisasm.parent}:{env['PATH']}"
        sass = subprocess.run([str(tool), "-sass", str(pathlib.Path(d, "k.cubin"))], capture_output=True, text=True,
                              env=env)
        pathlib.Path(a.sass).write_text(sass.stdout + sass.stderr)
    sys.exit(r.returncode)
