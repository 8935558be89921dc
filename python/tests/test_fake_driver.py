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

FAKE = pathlib.Path(__file__).resolve().parents[2] / "build" / "fake-cuda"

CHILD = r'''
import ctypes, faulthandler
faulthandler.enable()

class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]

class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]

class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]

class DLManaged(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]

alive = []  # the structs the capsules point at

class FakeCudaTensor:
    """A bf16 CUDA tensor for DLPack consumers, over host memory the fake driver never reads."""
    def __init__(self, shape):
        self.shape = shape
        n = 2
        for s in shape:
            n *= s
        self.buf = ctypes.create_string_buffer(n)

    def __dlpack_device__(self):
        return (2, 0)  # kDLCUDA, device 0

    def __dlpack__(self, *args, **kwargs):
        shape = (ctypes.c_int64 * len(self.shape))(*self.shape)
        m = DLManaged()
        m.dl_tensor.data = ctypes.addressof(self.buf)
        m.dl_tensor.device = DLDevice(2, 0)
        m.dl_tensor.ndim = len(self.shape)
        m.dl_tensor.dtype = DLDataType(4, 16, 1)  # kDLBfloat, 16 bits
        m.dl_tensor.shape = shape
        alive.extend([shape, m])
        new = ctypes.pythonapi.PyCapsule_New
        new.restype = ctypes.py_object
        new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return new(ctypes.addressof(m), b"dltensor", None)

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
'''


@pytest.mark.skipif(not (FAKE / "libcuda.so.1").exists(),
                    reason="needs the C++ build's fake driver (build/fake-cuda; scripts/build)")
def test_pinned_attention_through_the_python_device_path_on_the_fake_driver(tmp_path):
    env = dict(os.environ, LD_LIBRARY_PATH=str(FAKE), TILEPILOT_CACHE_DIR=str(tmp_path))
    r = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "pinned 2" in r.stdout, r.stdout + r.stderr
