"""The CUDA backend and the torch ops' TilePilot path. Skipped without torch and a CUDA GPU.

Without a release (TILEPILOT_RELEASE) dispatch runs its own fallbacks (cuBLASLt / cuDNN) for
backend='cuda', and the torch ops fall back to torch; results must be right either way.
"""
import math

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)
import tilepilot  # noqa: E402

DT = {"bf16": torch.bfloat16, "f16": torch.float16}
TOL = {"bf16": 2e-2, "f16": 1e-2}


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
@pytest.mark.parametrize("layout", ["nn", "nt", "tn"])
def test_gemm_cuda(dtype, layout):
    M, N, K = 77, 45, 133
    a = torch.randn(K if layout == "tn" else M, M if layout == "tn" else K, device="cuda",
                    dtype=DT[dtype])
    b = torch.randn(N if layout == "nt" else K, K if layout == "nt" else N, device="cuda",
                    dtype=DT[dtype])
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):  # the call must run on the caller's current stream
        c = tilepilot.gemm(a, b, layout, backend="cuda")
    s.synchronize()
    want = (a.float().t() if layout == "tn" else a.float()) @ (
        b.float().t() if layout == "nt" else b.float())
    torch.testing.assert_close(c.float(), want, atol=TOL[dtype] * math.sqrt(K), rtol=TOL[dtype])


@pytest.mark.parametrize("causal", [False, True])
def test_attention_cuda(causal):
    q = torch.randn(2, 8, 77, 64, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(2, 2, 77, 64, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    o = tilepilot.attention(q, k, v, causal=causal, backend="cuda")
    kk, vv = (t.float().repeat_interleave(4, dim=1) for t in (k, v))
    want = torch.nn.functional.scaled_dot_product_attention(q.float(), kk, vv, is_causal=causal)
    torch.testing.assert_close(o.float(), want, atol=2e-2, rtol=2e-2)


def test_torch_ops_on_cuda_match_torch():
    q = torch.randn(1, 4, 64, 128, device="cuda", dtype=torch.bfloat16)
    o = torch.ops.tilepilot.attention(q, q, q, True, None)
    want = torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
    torch.testing.assert_close(o, want, atol=2e-2, rtol=2e-2)
    a = torch.randn(64, 96, device="cuda", dtype=torch.float16)
    torch.testing.assert_close(torch.ops.tilepilot.gemm(a, a.t().contiguous(), "nn"),
                               a @ a.t(), atol=5e-2, rtol=1e-2)


def test_check_cuda_passes():
    r = tilepilot.check("gemm", "M=77,N=45,K=133", dtype="bf16", backend="cuda")
    assert r["passed"], r


def test_pin_defaults_runs_the_kernel_on_cuda():
    """Problems pinned to the default config (no release folder) take TilePilot's kernel."""
    tilepilot.configure(releases=[])
    try:
        g, a = "M=256,N=128,K=192", {"B": 1, "H": 4, "Hkv": 2, "S": 128, "Skv": 128, "D": 64,
                                     "causal": 1}
        assert not tilepilot.decide("gemm", g)["pinned"]
        r = tilepilot.pin_defaults("gemm", [g])
        assert r["arch"].startswith("sm_") and r["source"] == "defaults"
        tilepilot.pin_defaults("attention", [a])
        assert tilepilot.decide("gemm", g)["pinned"] and tilepilot.decide("attention", a)["pinned"]

        x = torch.randn(256, 192, device="cuda", dtype=torch.bfloat16)
        y = torch.randn(192, 128, device="cuda", dtype=torch.bfloat16)
        torch.testing.assert_close(tilepilot.gemm(x, y, backend="cuda").float(),
                                   x.float() @ y.float(), atol=2e-2 * math.sqrt(192), rtol=2e-2)
        q = torch.randn(1, 4, 128, 64, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(1, 2, 128, 64, device="cuda", dtype=torch.bfloat16)
        v = torch.randn_like(k)
        o = torch.ops.tilepilot.attention(q, k, v, True, None)
        kk, vv = (t.float().repeat_interleave(2, dim=1) for t in (k, v))
        want = torch.nn.functional.scaled_dot_product_attention(q.float(), kk, vv, is_causal=True)
        torch.testing.assert_close(o.float(), want, atol=2e-2, rtol=2e-2)
        torch.cuda.synchronize()
        assert tilepilot.counters("gemm")["pinned"] == 1, tilepilot.dispatch_summary()
        assert tilepilot.counters("attention")["pinned"] == 1, tilepilot.dispatch_summary()
    finally:
        tilepilot.configure(releases=[])


def test_torch_op_reads_head_views_in_place():
    """[B, S, H, D] projections viewed as [B, H, S, D] (how transformers passes q, k, v) run the
    pinned kernel on the views themselves, O written in q's layout: the same output as on
    contiguous copies, bit for bit, and no copy of q, k, v or O inside the op."""
    tilepilot.configure(releases=[])
    try:
        B, S, H, Hkv, D = 2, 256, 8, 2, 128
        tilepilot.pin_defaults("attention", [{"B": B, "H": H, "Hkv": Hkv, "S": S, "Skv": S,
                                              "D": D, "causal": 1}])
        q = torch.randn(B, S, H, D, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
        kv = torch.randn(B, S, 2 * Hkv, D, device="cuda", dtype=torch.bfloat16)
        k, v = kv[:, :, :Hkv].transpose(1, 2), kv[:, :, Hkv:].transpose(1, 2)
        assert not q.is_contiguous() and not k.is_contiguous()
        o_view = torch.ops.tilepilot.attention(q, k, v, True, None)
        o_dense = torch.ops.tilepilot.attention(q.contiguous(), k.contiguous(), v.contiguous(),
                                                True, None)
        torch.cuda.synchronize()
        assert tilepilot.counters("attention")["pinned"] == 2, tilepilot.dispatch_summary()
        # O in q's layout: [B, S, H, D] memory, written in place by the kernel.
        assert o_view.stride() == q.stride() and o_view.transpose(1, 2).is_contiguous()
        assert o_dense.is_contiguous()
        assert torch.equal(o_view, o_dense)
        kk, vv = (t.float().repeat_interleave(H // Hkv, dim=1) for t in (k, v))
        want = torch.nn.functional.scaled_dot_product_attention(q.float(), kk, vv, is_causal=True)
        torch.testing.assert_close(o_view.float(), want, atol=2e-2, rtol=2e-2)
        # The op makes no copy: only O is allocated.
        torch.cuda.synchronize()
        before = torch.cuda.memory_stats()["allocation.all.allocated"]
        torch.ops.tilepilot.attention(q, k, v, True, None)
        assert torch.cuda.memory_stats()["allocation.all.allocated"] - before == 1
    finally:
        tilepilot.configure(releases=[])
