"""gemm on the CPU interpreter against NumPy fp64, on small odd shapes."""
import numpy as np
import pytest
import tilepilot
from conftest import assert_close, gemm_ref, round_to

SHAPES = [(1, 1, 1), (7, 5, 13), (33, 17, 70), (65, 3, 31)]  # (M, N, K): ragged tiles


def operands(rng, M, N, K, layout):
    a = rng.uniform(-1, 1, (K, M) if layout == "tn" else (M, K)).astype(np.float32)
    b = rng.uniform(-1, 1, (N, K) if layout == "nt" else (K, N)).astype(np.float32)
    return a, b


@pytest.mark.parametrize("M,N,K", SHAPES)
@pytest.mark.parametrize("layout", ["nn", "nt", "tn"])
@pytest.mark.parametrize("dtype", ["f32", "bf16", "f16"])
def test_gemm_matches_fp64(rng, M, N, K, layout, dtype):
    a, b = operands(rng, M, N, K, layout)
    c = tilepilot.gemm(a, b, layout=layout, dtype=dtype)
    assert c.shape == (M, N) and c.dtype == np.float32
    # The reference sees the inputs as the GPU does: rounded to the dtype.
    want = gemm_ref(round_to(a, dtype), round_to(b, dtype), layout)
    assert_close(c, want, dtype, f"gemm {layout} {dtype} M={M} N={N} K={K}")


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_gemm_output_rounds_like_the_gpu(rng, dtype):
    a, b = operands(rng, 9, 11, 20, "nn")
    c = tilepilot.gemm(a, b, dtype=dtype)
    np.testing.assert_array_equal(c, round_to(c, dtype))  # every value is a bf16/f16 value


def test_gemm_f16_arrays_default_to_f16(rng):
    a, b = operands(rng, 5, 6, 7, "nn")
    c = tilepilot.gemm(a.astype(np.float16), b.astype(np.float16))
    np.testing.assert_array_equal(c, round_to(c, "f16"))


def test_gemm_non_contiguous_input(rng):
    a, b = operands(rng, 12, 10, 8, "nn")
    c = tilepilot.gemm(np.asfortranarray(a), b[:, ::1])
    assert_close(c, gemm_ref(a, b, "nn"), "f32")


def test_gemm_explicit_config(rng):
    a, b = operands(rng, 40, 24, 36, "nn")
    cfg = {"bm": 32, "bn": 16, "bk": 16, "stages": 1, "threads": 64}
    c = tilepilot.gemm(a, b, config=cfg)
    assert_close(c, gemm_ref(a, b, "nn"), "f32")
