"""Where the torch op's crash on the GPU lies (issue 18): one pinned attention call through
tilepilot._device in five child processes, each adding one ingredient of the torch op's call,
so the first one to crash names the cause. Each child prints the CUDA libraries mapped into it
before the call (which libnvrtc / libcublasLt / libcudnn the process holds), then "ok" or dies.

  T  `import tilepilot` only (it imports torch for its torch ops), no GPU call
  N  torch kept out (sys.modules["torch"] = None): device memory from cuMemAlloc (ctypes on
     libcuda), DLPack capsules made here, stream 0
  A  as N with torch allowed: libcuda initialised before `import tilepilot` imports torch
  B  torch imported (not initialised), the same ctypes tensors
  C  torch initialised (torch.cuda.init()), the same ctypes tensors, stream 0
  D  torch CUDA tensors, stream 0
  E  torch CUDA tensors on torch's current stream (the torch op's own call)
  F  as E with CUDA_HOME=/usr/local/cuda: TilePilot opens the toolkit's NVRTC, cuBLASLt and
     cuDNN by path instead of taking torch's, already loaded under the same sonames

Usage: python diag_cuda_path.py [--json FILE] [--gdb] [--preload segv_trace.so] (--gdb reruns
the first crashing case under gdb -batch, where gdb is installed; --preload loads segv_trace.c's
handler into each child, whose native stack is then resolved with addr2line). Also lists the
dynamic symbols that the extension and torch's libraries both define (an interposition suspect).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

CHILD = r'''
import ctypes, faulthandler, os, sys
faulthandler.enable()
case = sys.argv[1]
if case == "N":
    sys.modules["torch"] = None  # tilepilot's `find_spec("torch")` then says there is none
if case in "BCDEF":
    import torch
if case in "CDEF":
    torch.cuda.init()
    torch.empty(1, device="cuda")

sys.path.insert(0, sys.argv[2])
from dlpack_ctypes import CudaBf16, nbytes
cu = ctypes.CDLL("libcuda.so.1")
def check(r, what):
    if r != 0:
        print(f"{what} returned {r}", flush=True); sys.exit(3)

def DevTensor(shape):
    """A bf16 CUDA tensor over cuMemAlloc memory (zeroed)."""
    p = ctypes.c_uint64()
    check(cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(nbytes(shape))), "cuMemAlloc")
    check(cu.cuMemsetD8_v2(p, ctypes.c_ubyte(0), ctypes.c_size_t(nbytes(shape))), "cuMemsetD8")
    return CudaBf16(p.value, shape)

if case == "T":
    import tilepilot
    print("ok", flush=True)
    sys.exit(0)
if case in "NAB":  # nobody made a context yet: the primary one, as torch would
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    check(cu.cuInit(0), "cuInit")
    check(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    check(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
    check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")

import tilepilot
from tilepilot import _core, _device
ok, what = _core.cuda_status()
print("cuda_status", ok, what, flush=True)
shape = {"B": 2, "H": 16, "Hkv": 8, "S": 1024, "Skv": 1024, "D": 128, "causal": 1}
print("pin", tilepilot.pin_defaults("attention", [shape])["pins"], flush=True)
if case in "NABC":
    q, o = DevTensor((2, 16, 1024, 128)), DevTensor((2, 16, 1024, 128))
    k, v = DevTensor((2, 8, 1024, 128)), DevTensor((2, 8, 1024, 128))
else:
    mk = lambda *s: torch.randn(*s, device="cuda", dtype=torch.bfloat16)
    q, k, v, o = mk(2, 16, 1024, 128), mk(2, 8, 1024, 128), mk(2, 8, 1024, 128), mk(2, 16, 1024, 128)
libs = sorted({l.split()[-1] for l in open("/proc/self/maps")
               if any(n in l for n in ("libcuda.", "nvrtc", "cublas", "cudnn", "nvJit"))})
print("libs", *libs, sep="\n  ", flush=True)
stream = None if case in "EF" else 0
for i in range(2):
    print("call", i, flush=True)
    _device.attention(q, k, v, True, None, None, o, stream)
    print("returned", i, flush=True)
if case in "DEF":
    torch.cuda.synchronize()
    ref = torch.nn.functional.scaled_dot_product_attention(q, k.repeat_interleave(2, 1),
                                                           v.repeat_interleave(2, 1), is_causal=True)
    print("max_abs_err", float((o.float() - ref.float()).abs().max()), flush=True)
else:
    check(cu.cuCtxSynchronize(), "cuCtxSynchronize")
print("counters", _core.counters("attention"), flush=True)
print("ok", flush=True)
'''


def symbolize(stderr):
    """addr2line for the TRACE lines (segv_trace.c) that fall in TilePilot's own objects."""
    out = []
    for line in stderr.splitlines():
        if not line.startswith("TRACE "):
            continue
        obj, _, off = line.split()[1].rpartition("+")
        name = line.split(maxsplit=2)[2] if len(line.split()) > 2 else "?"
        where = ""
        if "tilepilot" in obj and shutil.which("addr2line"):
            r = subprocess.run(["addr2line", "-f", "-C", "-i", "-e", obj, hex(int(off, 16) - 1)],
                               capture_output=True, text=True)
            where = " | ".join(l.strip() for l in r.stdout.splitlines())
        out.append(f"{os.path.basename(obj)}+{off} {name} {where}")
    return out


def overlapping_symbols():
    """Dynamic symbols defined both by tilepilot's extension and by one of torch's libraries."""
    try:
        import importlib.util
        import glob
        core = glob.glob(os.path.join(os.path.dirname(importlib.util.find_spec("tilepilot").origin),
                                      "_core*.so"))
        torch_lib = os.path.join(os.path.dirname(importlib.util.find_spec("torch").origin), "lib")
    except Exception as e:
        return [f"not checked: {e}"]
    if not core or not shutil.which("nm"):
        return ["not checked: no _core*.so or no nm"]

    def defined(path):
        r = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True)
        return {l.split()[-1] for l in r.stdout.splitlines() if len(l.split()) >= 3}
    ours = defined(core[0])
    found = []
    for lib in sorted(glob.glob(os.path.join(torch_lib, "*.so*"))):
        both = sorted(s for s in ours & defined(lib) if not s.startswith("_ZNSt") and
                      not s.startswith("_ZSt") and not s.startswith("_ZNKSt"))
        if both:
            found.append(f"{os.path.basename(lib)}: {len(both)} shared, e.g. {both[:8]}")
    return [f"_core exports {len(ours)} dynamic symbols"] + (found or ["no overlap with torch/lib"])


def run_case(case, timeout, gdb=False, preload=None):
    cmd = [sys.executable, "-c", CHILD, case, os.path.dirname(os.path.abspath(__file__))]
    env = dict(os.environ)
    if case == "F":
        env["CUDA_HOME"] = "/usr/local/cuda"
    else:
        env.pop("CUDA_HOME", None)
    if preload and not gdb:
        env["LD_PRELOAD"] = preload
    if gdb:
        cmd = ["gdb", "-batch", "-ex", "run", "-ex", "bt 40", "-ex", "info sharedlibrary",
               "--args"] + cmd
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        return {"case": case, "rc": r.returncode, "ok": r.returncode == 0 and "ok" in r.stdout.splitlines(),
                "stdout": r.stdout[-6000:], "stderr": r.stderr[-6000:],
                "native": symbolize(r.stderr)}
    except subprocess.TimeoutExpired as e:
        return {"case": case, "rc": "timeout", "ok": False, "stdout": str(e.stdout)[-3000:],
                "stderr": str(e.stderr)[-3000:]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json")
    ap.add_argument("--gdb", action="store_true")
    ap.add_argument("--preload", help="segv_trace.so (built from segv_trace.c)")
    ap.add_argument("--cases", default="TNABCDEF")
    ap.add_argument("--timeout", type=int, default=60)
    a = ap.parse_args()
    results = [{"case": "symbols", "ok": True, "overlap": overlapping_symbols()}]
    print("== symbols", *results[0]["overlap"], sep="\n  ", flush=True)
    for c in a.cases:
        r = run_case(c, a.timeout, preload=a.preload)
        results.append(r)
        print(f"== case {c}: rc={r['rc']} {'ok' if r['ok'] else 'FAILED'}", flush=True)
        err = "\n".join(l for l in r["stderr"].splitlines() if not l.startswith("TRACE "))
        print(r["stdout"], err[-1500:], "native stack:", *r["native"][:30], sep="\n", flush=True)
    bad = [r for r in results if not r["ok"]]
    if a.gdb and bad and shutil.which("gdb"):
        g = run_case(bad[0]["case"], 2 * a.timeout, gdb=True)
        g["case"] += " (gdb)"
        results.append(g)
        print(f"== gdb case {bad[0]['case']}:\n{g['stdout']}\n{g['stderr'][-3000:]}", flush=True)
    elif a.gdb and bad:
        print("== gdb not installed; no native backtrace", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
