"""Shared helpers: NumPy fp64 references and GPU-style rounding for the CPU-backend tests."""
import os

import numpy as np
import pytest

if os.environ.get("TILEPILOT_REQUIRE_TORCH") == "1":
    # scripts/test-python installs torch and transformers: the torch-facing tests must run, not
    # skip, so a broken install fails here instead of passing quietly.
    import torch  # noqa: F401
    import transformers  # noqa: F401


def round_to(x, dtype):
    """float32 values as storing them in `dtype` keeps them (round to nearest even)."""
    x = np.asarray(x, np.float32)
    if dtype == "f32":
        return x
    if dtype == "f16":
        return x.astype(np.float16).astype(np.float32)
    u = x.view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return u.astype(np.uint32).view(np.float32)


def gemm_ref(a, b, layout):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return (a.T if layout == "tn" else a) @ (b.T if layout == "nt" else b)


def attention_ref(q, k, v, causal=False, scale=None, lens=None):
    """fp64 attention with TilePilot's masks: key j valid when j < L_b and, when causal,
    j <= i + L_b - S (bottom-right aligned). Rows with no valid key give 0."""
    q, k, v = (np.asarray(t, np.float64) for t in (q, k, v))
    B, H, S, D = q.shape
    Skv = k.shape[2]
    rep = H // k.shape[1]
    k, v = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)
    s = np.einsum("bhid,bhjd->bhij", q, k) * (scale if scale else 1 / np.sqrt(D))
    L = np.array(lens if lens is not None else [Skv] * B)[:, None, None, None]
    i = np.arange(S)[None, None, :, None]
    j = np.arange(Skv)[None, None, None, :]
    valid = (j < L) & ((j <= i + L - S) if causal else True)
    s = np.where(valid, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    p = np.where(valid, np.exp(s - np.where(np.isfinite(m), m, 0)), 0.0)
    l = p.sum(axis=-1, keepdims=True)
    o = np.einsum("bhij,bhjd->bhid", p, v) / np.where(l > 0, l, 1)
    lse = np.where(l[..., 0] > 0, np.log(np.where(l[..., 0] > 0, l[..., 0], 1)) + m[..., 0], -np.inf)
    return o, lse


TOL = {"f32": 1e-4, "bf16": 2e-2, "f16": 1e-2}  # atol = rtol per dtype, as `tilepilot check`


def assert_close(got, want, dtype, what=""):
    tol = TOL[dtype]
    err = np.abs(got - want)
    bad = err > tol + tol * np.abs(want)
    assert not bad.any(), (f"{what}: {bad.sum()} of {bad.size} elements off, max abs err "
                           f"{err.max():.3g} (tol {tol})")


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
