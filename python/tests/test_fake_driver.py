"""The CUDA backend's Python path on the fake driver (build/fake-cuda, the C++ tests' stand-in
for libcuda: launches do nothing, NVRTC compiles for real): DLPack device tensors made here with
ctypes go through tilepilot._device and _core.run_cuda to a pinned kernel, twice (the second call
takes the dispatcher's host caches). On the H200 the torch op crashed inside run_cuda
(docs/perf-log.md, 2026-12-02 s5/s6); this holds the path up to the driver to one behaviour.
It runs in a child process, which loads the fake libcuda through LD_LIBRARY_PATH."""
import os
import pathlib
import subprocess
import sys

import pytest

# scripts/test-python builds it and says where; else the C++ Release build's copy.
FAKE = pathlib.Path(os.environ.get("TILEPILOT_FAKE_CUDA_DIR") or
                    pathlib.Path(__file__).resolve().parents[2] / "build" / "fake-cuda")

SCRIPTS = pathlib.Path(__file__).resolve().parents[1] / "scripts"

CHILD = r'''
import ctypes, faulthandler, sys
faulthandler.enable()
sys.path.insert(0, sys.argv[1])
from dlpack_ctypes import CudaBf16, nbytes

buffers = []  # host memory the fake driver never reads


def FakeCudaTensor(shape):
    buffers.append(ctypes.create_string_buffer(nbytes(shape)))
    return CudaBf16(ctypes.addressof(buffers[-1]), shape)

import tilepilot
from tilepilot import _core, _device

ok, what = _core.cuda_status()
assert ok, what
shape = {"B": 2, "H": 16, "Hkv": 8, "S": 1024, "Skv": 1024, "D": 128, "causal": 1}
tilepilot.pin_defaults("attention", [shape])
q, o = FakeCudaTensor((2, 16, 1024, 128)), FakeCudaTensor((2, 16, 1024, 128))
k, v = FakeCudaTensor((2, 8, 1024, 128)), FakeCudaTensor((2, 8, 1024, 128))
for _ in range(2):
    _device.attention(q, k, v, True, None, None, o, 0)
print("pinned", _core.counters("attention")["pinned"], flush=True)
# [B, S, H, D] projections viewed as [B, H, S, D]: read in place, no copy, the same pinned kernel.
def heads(H):
    buffers.append(ctypes.create_string_buffer(nbytes((2, 1024, H, 128))))
    return CudaBf16(ctypes.addressof(buffers[-1]), (2, H, 1024, 128),
                    (1024 * H * 128, 128, H * 128, 1))
_device.attention(heads(16), heads(8), heads(8), True, None, None, o, 0)
print("views pinned", _core.counters("attention")["pinned"], flush=True)
try:  # a gemm operand may not be a view: a clear error, before anything runs
    a = CudaBf16(ctypes.addressof(buffers[0]), (64, 64), (1, 64))
    _device.gemm(a, FakeCudaTensor((64, 64)), "nn", None, FakeCudaTensor((64, 64)), 0)
except Exception as e:
    print("gemm view:", type(e).__name__, e, flush=True)
'''


@pytest.mark.skipif(not (FAKE / "libcuda.so.1").exists(),
                    reason="needs the fake driver (scripts/test-python builds it; or build/fake-cuda "
                           "from scripts/build)")
def test_pinned_attention_through_the_python_device_path_on_the_fake_driver(tmp_path):
    env = dict(os.environ, LD_LIBRARY_PATH=str(FAKE), TILEPILOT_CACHE_DIR=str(tmp_path))
    r = subprocess.run([sys.executable, "-c", CHILD, str(SCRIPTS)], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "pinned 2" in r.stdout, r.stdout + r.stderr
    assert "views pinned 3" in r.stdout, r.stdout + r.stderr
    assert "gemm view: ValueError" in r.stdout and "takes it only contiguous" in r.stdout, \
        r.stdout + r.stderr
