"""torch.ops.tilepilot.*: registration, fallbacks, fake tensors, torch.compile (CPU tensors).

Skipped when torch is not installed. CPU tensors lie outside the released envelope, so every
call here takes the torch fallback; test_gpu.py covers the TilePilot path.
"""
import logging

import pytest

torch = pytest.importorskip("torch")
import tilepilot  # noqa: E402
import tilepilot.torch_ops as tops  # noqa: E402


def test_ops_are_registered():
    assert tilepilot.torch_ops_error is None
    assert hasattr(torch.ops.tilepilot, "gemm") and hasattr(torch.ops.tilepilot, "attention")


@pytest.mark.parametrize("layout", ["nn", "nt", "tn"])
def test_gemm_fallback_matches_matmul(layout):
    a = torch.randn(7, 13) if layout != "tn" else torch.randn(13, 7)
    b = torch.randn(13, 5) if layout != "nt" else torch.randn(5, 13)
    want = torch.matmul(a.t() if layout == "tn" else a, b.t() if layout == "nt" else b)
    torch.testing.assert_close(torch.ops.tilepilot.gemm(a, b, layout), want)


def test_attention_fallback_matches_sdpa_with_grouped_heads():
    q, k, v = torch.randn(2, 4, 9, 16), torch.randn(2, 2, 9, 16), torch.randn(2, 2, 9, 16)
    got = torch.ops.tilepilot.attention(q, k, v, True, None)
    rep = lambda t: t.repeat_interleave(2, dim=1)  # noqa: E731
    want = torch.nn.functional.scaled_dot_product_attention(q, rep(k), rep(v), is_causal=True)
    torch.testing.assert_close(got, want)
    assert got.is_contiguous()


def test_fallback_is_logged_once_and_counted(caplog):
    tops._logged.clear()
    tops.reset_stats()
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    with caplog.at_level(logging.WARNING, logger="tilepilot"):
        for _ in range(3):
            torch.ops.tilepilot.gemm(a, b, "nn")
    lines = [r.getMessage() for r in caplog.records if "falls back" in r.getMessage()]
    assert len(lines) == 1 and "not_cuda" in lines[0]
    assert tops.stats()["gemm"] == {"tilepilot": 0, "fallback": {"not_cuda": 3}}


def test_bad_shapes_raise():
    with pytest.raises(ValueError, match="2-d"):
        torch.ops.tilepilot.gemm(torch.randn(2, 3, 4), torch.randn(4, 2), "nn")
    with pytest.raises(ValueError, match="Hkv dividing H"):
        torch.ops.tilepilot.attention(torch.randn(1, 3, 4, 16), torch.randn(1, 2, 4, 16),
                                      torch.randn(1, 2, 4, 16), False, None)


def test_torch_compile_traces_the_ops():
    def f(a, b, q, k, v):
        return torch.ops.tilepilot.gemm(a, b, "nt") * 2, torch.ops.tilepilot.attention(q, k, v)

    args = (torch.randn(6, 8), torch.randn(5, 8), torch.randn(1, 2, 7, 16),
            torch.randn(1, 2, 7, 16), torch.randn(1, 2, 7, 16))
    compiled = torch.compile(f, backend="aot_eager", fullgraph=True)
    for got, want in zip(compiled(*args), f(*args)):
        torch.testing.assert_close(got, want)


def test_opcheck():
    a, b = torch.randn(5, 3), torch.randn(3, 4)
    torch.library.opcheck(torch.ops.tilepilot.gemm.default, (a, b, "nn"))
    q = torch.randn(1, 2, 5, 16)
    torch.library.opcheck(torch.ops.tilepilot.attention.default, (q, q.clone(), q.clone(), True,
                                                                  None))
