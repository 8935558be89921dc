"""A bf16 CUDA tensor for DLPack consumers over a device address, made with ctypes alone (no
torch, no CuPy): the stand-in the CUDA path's own checks hand to tilepilot._device, over memory
from the fake driver (python/tests/test_fake_driver.py) or from cuMemAlloc on a real GPU
(python/scripts/diag_cuda_path.py)."""
import ctypes


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


_alive = []  # the structs the capsules point at: no deleter frees them, the process ends first


def nbytes(shape):
    n = 2
    for s in shape:
        n *= s
    return n


class CudaBf16:
    """A bf16 tensor of `shape` at device address `ptr` on cuda:0: contiguous, or a view with
    `strides` (elements, outermost first)."""

    def __init__(self, ptr, shape, strides=None):
        self.ptr, self.shape = ptr, tuple(shape)
        self.strides = tuple(strides) if strides is not None else None

    def __dlpack_device__(self):
        return (2, 0)  # kDLCUDA, device 0

    def __dlpack__(self, *args, **kwargs):
        shape = (ctypes.c_int64 * len(self.shape))(*self.shape)
        m = DLManaged()
        m.dl_tensor.data = self.ptr
        m.dl_tensor.device = DLDevice(2, 0)
        m.dl_tensor.ndim = len(self.shape)
        m.dl_tensor.dtype = DLDataType(4, 16, 1)  # kDLBfloat, 16 bits
        m.dl_tensor.shape = shape
        _alive.extend([shape, m])
        if self.strides is not None:
            strides = (ctypes.c_int64 * len(self.strides))(*self.strides)
            m.dl_tensor.strides = strides
            _alive.append(strides)
        new = ctypes.pythonapi.PyCapsule_New
        new.restype = ctypes.py_object
        new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return new(ctypes.addressof(m), b"dltensor", None)
