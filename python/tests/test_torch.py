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


def test_backward_through_the_ops_raises():
    a, b = torch.randn(4, 3, requires_grad=True), torch.randn(3, 5)
    c = torch.ops.tilepilot.gemm(a, b, "nn")
    torch.testing.assert_close(c, a.detach() @ b)
    assert c.requires_grad  # an error on backward, not a silently missing gradient
    with pytest.raises(RuntimeError, match="no autograd formula"):
        c.sum().backward()
    q = torch.randn(1, 2, 5, 16, requires_grad=True)
    o = torch.ops.tilepilot.attention(q, q.detach(), q.detach(), True, None)
    with pytest.raises(RuntimeError, match="F.scaled_dot_product_attention"):
        o.sum().backward()


def test_requires_grad_inputs_under_no_grad_run():
    a, b = torch.randn(4, 3, requires_grad=True), torch.randn(3, 5, requires_grad=True)
    with torch.no_grad():
        c = torch.ops.tilepilot.gemm(a, b, "nn")
    assert not c.requires_grad
    torch.testing.assert_close(c, a.detach() @ b.detach())


def test_fake_and_meta_tensors_take_the_fake_impl():
    from torch._subclasses.fake_tensor import FakeTensorMode
    tops.reset_stats()
    with FakeTensorMode() as mode:
        q = mode.from_tensor(torch.randn(1, 2, 7, 16))
        assert torch.ops.tilepilot.attention(q, q, q, True).shape == (1, 2, 7, 16)
    c = torch.ops.tilepilot.gemm(torch.randn(6, 8, device="meta"), torch.randn(5, 8,
                                 device="meta"), "nt")
    assert c.shape == (6, 5) and c.is_meta
    assert tops.stats() == {}  # the real kernel (which counts every call) never ran


@pytest.fixture
def tilepilot_path_on_cpu(monkeypatch):
    """CPU tensors through the TilePilot branch: the device check passes, the dispatcher's
    answers are recorded (None: pinned), run_torch records its tensors and fills the output."""
    asked, runs = [], []

    def decide(key, op, shape, dtype):
        asked.append((op, shape))
        return None

    def run_torch(op, tensors, options):
        runs.append((op, tensors, options))
        tensors[-1].fill_(7)

    monkeypatch.setattr(tops, "_verdicts", {})
    monkeypatch.setattr(tops, "_decisions", {})
    monkeypatch.setattr(tops, "_device_reason", lambda tensors, dtypes: None)
    monkeypatch.setattr(tops, "_decide", decide)
    monkeypatch.setattr(tops._device, "run_torch", run_torch)
    tops.reset_stats()
    return asked, runs


def test_a_repeated_call_reuses_its_verdict(tilepilot_path_on_cpu):
    asked, runs = tilepilot_path_on_cpu
    q = torch.randn(1, 4, 8, 16).transpose(1, 2)  # [1, 8, 4, 16], not contiguous
    k = torch.randn(1, 2, 8, 16).transpose(1, 2)
    for _ in range(3):
        o = torch.ops.tilepilot.attention(q.transpose(1, 2), k.transpose(1, 2),
                                          k.transpose(1, 2), True)
    assert (o == 7).all() and o.shape == (1, 4, 8, 16) and o.is_contiguous()
    assert len(asked) == 1 and tops.stats()["attention"] == {"tilepilot": 3, "fallback": {}}
    assert all(t.is_contiguous() for _, ts, _ in runs for t in ts)
    assert runs[0][0] == "attention" and runs[0][2] == {"causal": "1"}
    torch.ops.tilepilot.attention(q.transpose(1, 2), k.transpose(1, 2), k.transpose(1, 2), False)
    assert len(asked) == 2  # another call signature: asked again
    tops.clear_decisions()  # what tilepilot.configure() and pin_defaults() call
    torch.ops.tilepilot.attention(q.transpose(1, 2), k.transpose(1, 2), k.transpose(1, 2), True)
    assert len(asked) == 3


def test_tilepilot_path_keeps_the_cuda_backend_shape_errors(tilepilot_path_on_cpu):
    _, runs = tilepilot_path_on_cpu
    for _ in range(2):  # an error is raised again, never remembered as a verdict
        with pytest.raises(ValueError, match="inner dimensions do not agree"):
            torch.ops.tilepilot.gemm(torch.randn(4, 3), torch.randn(5, 6), "nn")
    with pytest.raises(ValueError, match="must agree on B and D"):
        torch.ops.tilepilot.attention(torch.randn(2, 2, 4, 16), torch.randn(1, 2, 4, 16),
                                      torch.randn(1, 2, 4, 16))
    assert not runs
    c = torch.ops.tilepilot.gemm(torch.randn(3, 4), torch.randn(3, 5), "tn")
    assert c.shape == (4, 5) and runs[0][2] == {"layout": "tn"}


def test_no_gpu_is_checked_again(tilepilot_path_on_cpu, monkeypatch):
    answers = iter([("no_gpu", "no driver"), None])
    monkeypatch.setattr(tops, "_device_reason", lambda tensors, dtypes: next(answers))
    a, b = torch.randn(4, 3), torch.randn(3, 5)
    torch.testing.assert_close(torch.ops.tilepilot.gemm(a, b), a @ b)  # the fallback
    assert (torch.ops.tilepilot.gemm(a, b) == 7).all()  # the GPU found: TilePilot's path
    assert tops.stats()["gemm"] == {"tilepilot": 1, "fallback": {"no_gpu": 1}}


def test_nan_scale_verdicts_are_not_kept():
    q = torch.randn(1, 2, 4, 16)
    torch.ops.tilepilot.attention(q, q, q, False, None)
    n = len(tops._verdicts)
    for _ in range(3):
        torch.ops.tilepilot.attention(q, q, q, False, float("nan"))
    assert len(tops._verdicts) == n


def test_compiled_graph_holds_the_ops_as_single_nodes():
    from torch._dynamo.backends.common import aot_autograd
    graphs = []

    def record(gm, example_inputs):
        graphs.append(gm)
        return gm

    def f(a, b, q):
        return torch.ops.tilepilot.gemm(a, b, "nn") + 1, torch.ops.tilepilot.attention(q, q, q)

    args = (torch.randn(4, 8), torch.randn(8, 3), torch.randn(1, 2, 5, 16))
    torch._dynamo.reset()
    torch.compile(f, backend=aot_autograd(fw_compiler=record), fullgraph=True)(*args)
    targets = {n.target for g in graphs for n in g.graph.nodes if n.op == "call_function"}
    # The ops themselves, not what their kernels call (matmul, SDPA): opaque to the trace.
    assert targets == {torch.ops.tilepilot.gemm.default, torch.ops.tilepilot.attention.default,
                       torch.ops.aten.add.Tensor}, targets


def test_head_views_reach_the_kernel_uncopied_and_o_takes_q_layout(tilepilot_path_on_cpu):
    """[B, S, H, D] projections viewed as [B, H, S, D] go to run_torch as those views (same
    storage, same strides) and the output is [B, S, H, D] memory; a view the kernel cannot read
    in place (innermost stride 2) arrives as a contiguous copy."""
    _, runs = tilepilot_path_on_cpu
    x = torch.randn(2, 16, 4, 32)  # [B, S, H, D + 16]: a padded row
    q = x[..., :16].transpose(1, 2)  # [2, 4, 16, 16], strides (2048, 32, 128, 1)
    kv = torch.randn(2, 16, 4, 16)
    k, v = kv[:, :, :2].transpose(1, 2), kv[:, :, 2:].transpose(1, 2)
    o = torch.ops.tilepilot.attention(q, k, v, True)
    (_, tensors, _), = runs
    for sent, given in zip(tensors[:3], (q, k, v)):
        assert sent.data_ptr() == given.data_ptr() and sent.stride() == given.stride()
    assert o.stride() == torch.empty_like(q).stride() and o.transpose(1, 2).is_contiguous()
    assert tensors[3] is o and bool((o == 7).all())
    odd = torch.randn(2, 4, 16, 32)[..., ::2]  # innermost stride 2
    torch.ops.tilepilot.attention(odd, k, v, True)
    assert runs[1][1][0].is_contiguous() and runs[1][1][0].data_ptr() != odd.data_ptr()
    torch.testing.assert_close(runs[1][1][0], odd)


def test_opcheck_on_head_views():
    """Fake and real agree on the output's layout when q is a per-head view (the fallback path
    here, on the CPU: SDPA's result is copied into q's layout where its strides differ)."""
    x = torch.randn(1, 5, 2, 16)
    q = x.transpose(1, 2)
    torch.library.opcheck(torch.ops.tilepilot.attention.default, (q, q.clone(), q.clone(), True,
                                                                  None))
    o = torch.ops.tilepilot.attention(q, q, q, True, None)
    assert o.stride() == torch.empty_like(q).stride()
    torch.testing.assert_close(o, torch.nn.functional.scaled_dot_product_attention(
        q, q, q, is_causal=True))
