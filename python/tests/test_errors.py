"""Bad calls fail with a ValueError that names what was wrong."""
import numpy as np
import pytest
import tilepilot

f32 = np.float32


def m(*shape):
    return np.zeros(shape, f32)


@pytest.mark.parametrize("call,match", [
    (lambda: tilepilot.gemm(m(3, 4, 5), m(4, 2)), r"2-d.*a\.shape=\(3, 4, 5\)"),
    (lambda: tilepilot.gemm(m(3, 4), m(5, 2)), r"inner dimensions.*K=4.*K=5"),
    (lambda: tilepilot.gemm(m(3, 4), m(2, 5), layout="nt"), r"inner dimensions.*'nt'"),
    (lambda: tilepilot.gemm(m(3, 4), m(4, 2), layout="tt"), r"layout='tt'"),
    (lambda: tilepilot.gemm(np.zeros((3, 4)), m(4, 2)), r"a has dtype float64.*astype"),
    (lambda: tilepilot.gemm(m(3, 4), np.zeros((4, 2), np.int32)), r"b has dtype int32"),
    (lambda: tilepilot.gemm(m(3, 4), m(4, 2), dtype="f64"), r"dtype 'f64'"),
    (lambda: tilepilot.gemm(m(3, 4), m(4, 2), backend="tpu"), r"backend 'tpu'"),
    (lambda: tilepilot.gemm(m(0, 4), m(4, 2)), r"M"),
    (lambda: tilepilot.gemm(m(3, 4), m(4, 2), config={"bm": 24}), r"config|bm"),
    (lambda: tilepilot.gemm(m(3, 4), m(4, 2), config={"bogus": 1, "bm": 16, "bn": 16, "bk": 16,
                                                      "stages": 1, "threads": 32}), r"bogus"),
    (lambda: tilepilot.gemm(m(3, 4), m(4, 2), stream=1), r"backend='cuda' only"),
])
def test_gemm_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("call,match", [
    (lambda: tilepilot.attention(m(2, 3, 4), m(2, 1, 3, 4), m(2, 1, 3, 4)), r"q must be 4-d"),
    (lambda: tilepilot.attention(m(1, 2, 3, 16), m(1, 2, 5, 16), m(1, 2, 4, 16)),
     r"k and v must have one shape"),
    (lambda: tilepilot.attention(m(1, 2, 3, 16), m(1, 2, 5, 32), m(1, 2, 5, 32)),
     r"agree on B and D"),
    (lambda: tilepilot.attention(m(1, 3, 3, 16), m(1, 2, 5, 16), m(1, 2, 5, 16)),
     r"Hkv=2 does not divide H=3"),
    (lambda: tilepilot.attention(m(1, 1, 3, 40), m(1, 1, 3, 40), m(1, 1, 3, 40)), r"D=40"),
    (lambda: tilepilot.attention(m(1, 1, 3, 16), m(1, 1, 3, 16), m(1, 1, 3, 16), dtype="f32"),
     r"dtype f32 is not supported.*bf16 or f16"),
    (lambda: tilepilot.attention(m(1, 1, 3, 16), m(1, 1, 3, 16), m(1, 1, 3, 16), scale=-1.0),
     r"scale=-1.0"),
    (lambda: tilepilot.attention(m(2, 1, 3, 16), m(2, 1, 3, 16), m(2, 1, 3, 16), lens=[3]),
     r"lens has 1 entries but the batch is 2"),
    (lambda: tilepilot.attention(m(1, 1, 3, 16), m(1, 1, 3, 16), m(1, 1, 3, 16), lens=[9]),
     r"lens entry '9'"),
    (lambda: tilepilot.attention(m(1, 1, 3, 16), m(1, 1, 3, 16), m(1, 1, 3, 16), backend="cuda",
                                 lens=[3]), r"lens= applies to backend='cpu' only"),
])
def test_attention_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_cuda_backend_rejects_numpy_or_reports_missing_gpu():
    # NumPy arrays are not CUDA tensors: either message names what to do instead.
    with pytest.raises((ValueError, RuntimeError), match=r"CUDA|GPU|DLPack|cuda"):
        tilepilot.gemm(m(3, 4), m(4, 2), backend="cuda")


def test_check_errors():
    with pytest.raises(ValueError, match=r"nope"):
        tilepilot.check("nope", "M=1")
    with pytest.raises(ValueError, match=r"bogus"):
        tilepilot.check("gemm", {"M": 4, "N": 4, "K": 4, "bogus": 1})
    with pytest.raises(ValueError, match=r"not key=value"):
        tilepilot.check("gemm", "M=4,N")


def test_gpu_error_types_keep_their_meaning():
    # A lost CUDA context is not bad input: callers that catch ValueError for bad shapes must not
    # swallow it. Device out of memory is a MemoryError, never a ValueError either.
    assert issubclass(tilepilot.DeviceFault, RuntimeError)
    assert not issubclass(tilepilot.DeviceFault, ValueError)
    assert issubclass(tilepilot.DeviceOutOfMemory, MemoryError)
    assert not issubclass(tilepilot.DeviceOutOfMemory, ValueError)
    assert tilepilot.DeviceFault.__module__.startswith("tilepilot")
