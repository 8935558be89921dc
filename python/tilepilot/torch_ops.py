"""torch.ops.tilepilot.gemm and torch.ops.tilepilot.attention as PyTorch custom ops.

Registered with torch.library.custom_op plus a fake (meta) implementation, so torch.compile
traces them as single opaque ops. A call runs TilePilot's released kernel only inside the
released envelope - CUDA tensors on TilePilot's device, one supported dtype, and a problem the
dispatcher's release pins (tilepilot.decide) - and otherwise falls back to torch.matmul /
F.scaled_dot_product_attention, logged once per reason on the "tilepilot" logger.

attention follows SDPA's meaning: is_causal is top-left aligned, which TilePilot's
(bottom-right) causal mask equals only when S == Skv, so causal calls with S != Skv fall back.
"""
from __future__ import annotations

import logging
import math
from typing import Optional

import torch
import torch.nn.functional as F

from . import _core, _device

log = logging.getLogger("tilepilot")

_DTYPES = {torch.bfloat16: "bf16", torch.float16: "f16", torch.float32: "f32"}
_decisions: dict[tuple, Optional[str]] = {}  # problem -> None (pinned) or why not
_logged: set[tuple[str, str]] = set()
_stats: dict[str, dict] = {}  # op -> {"tilepilot": n, "fallback": {reason: n}}


def stats() -> dict:
    """Calls per op since import (or reset_stats()): {"tilepilot": n, "fallback": {reason: n}}."""
    return {op: {"tilepilot": s["tilepilot"], "fallback": dict(s["fallback"])}
            for op, s in _stats.items()}


def reset_stats() -> None:
    _stats.clear()


def _count(op: str, reason: Optional[str]) -> None:
    s = _stats.setdefault(op, {"tilepilot": 0, "fallback": {}})
    if reason is None:
        s["tilepilot"] += 1
    else:
        s["fallback"][reason] = s["fallback"].get(reason, 0) + 1


def clear_decisions() -> None:
    """Forget cached dispatch decisions (tilepilot.configure() calls this)."""
    _decisions.clear()


def _fallback(op: str, reason: str, detail: str) -> None:
    _count(op, reason)
    if (op, reason) not in _logged:
        _logged.add((op, reason))
        impl = "torch.matmul" if op == "gemm" else "F.scaled_dot_product_attention"
        log.warning("%s falls back to %s (%s): %s [logged once per reason]", op, impl, reason,
                    detail)


def _device_reason(tensors, dtypes) -> Optional[tuple[str, str]]:
    """(reason, detail) when the tensors themselves rule TilePilot out, else None."""
    t0 = tensors[0]
    if not all(t.is_cuda for t in tensors):
        return "not_cuda", f"tensors on {t0.device}"
    if t0.dtype not in dtypes or any(t.dtype != t0.dtype for t in tensors):
        return "dtype", f"dtypes {[str(t.dtype) for t in tensors]}"
    if any(t.device != t0.device for t in tensors) or t0.device.index != _core.selected_device():
        return "device", (f"tensors on {[str(t.device) for t in tensors]}, TilePilot runs on "
                          f"cuda:{_core.selected_device()} (TILEPILOT_DEVICE)")
    try:
        _device.require_cuda()
    except RuntimeError as e:
        return "no_gpu", str(e)
    return None


def _decide(key: tuple, op: str, shape: dict, dtype: str) -> Optional[str]:
    """None when the release pins this problem on this device, else the dispatcher's reason."""
    if key not in _decisions:
        try:
            d = _core.decide(op, {k: str(v) for k, v in shape.items()}, dtype, True)
            _decisions[key] = None if d["pinned"] else f"{d['reason']}: {d['why']}"
        except (ValueError, RuntimeError) as e:  # e.g. D unsupported: outside the envelope
            _decisions[key] = f"unsupported: {e}"
    return _decisions[key]


def _torch_gemm(a, b, layout):
    return torch.matmul(a.t() if layout == "tn" else a, b.t() if layout == "nt" else b)


def _gemm_mn(a, b, layout):
    return (a.shape[1] if layout == "tn" else a.shape[0],
            b.shape[0] if layout == "nt" else b.shape[1])


@torch.library.custom_op("tilepilot::gemm", mutates_args=())
def gemm(a: torch.Tensor, b: torch.Tensor, layout: str = "nn") -> torch.Tensor:
    """op(a) op(b) with layout 'nn' | 'nt' | 'tn' (see tilepilot.gemm)."""
    if layout not in ("nn", "nt", "tn") or a.dim() != 2 or b.dim() != 2:
        raise ValueError(f"tilepilot::gemm: needs 2-d a, b and layout nn|nt|tn, got "
                         f"a {tuple(a.shape)}, b {tuple(b.shape)}, layout {layout!r}")
    why = _device_reason((a, b), _DTYPES)
    if why is None:
        (M, N), K = _gemm_mn(a, b, layout), (a.shape[0] if layout == "tn" else a.shape[1])
        key = ("gemm", M, N, K, layout, a.dtype)
        detail = _decide(key, "gemm", {"M": M, "N": N, "K": K, "layout": layout}, _DTYPES[a.dtype])
        why = None if detail is None else (detail.split(":")[0], detail)
    if why is not None:
        _fallback("gemm", *why)
        return _torch_gemm(a, b, layout).contiguous()
    out = _device.gemm(a.contiguous(), b.contiguous(), layout, None, None, None)
    _count("gemm", None)
    return out


@gemm.register_fake
def _(a, b, layout="nn"):
    return a.new_empty(_gemm_mn(a, b, layout))


def _sdpa(q, k, v, causal, scale):
    if q.shape[1] != k.shape[1]:  # grouped heads: SDPA's enable_gqa needs torch >= 2.5
        rep = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)


@torch.library.custom_op("tilepilot::attention", mutates_args=())
def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
              scale: Optional[float] = None) -> torch.Tensor:
    """SDPA-compatible attention: q [B, H, S, D], k and v [B, Hkv, Skv, D] (Hkv divides H)."""
    if q.dim() != 4 or k.dim() != 4 or k.shape != v.shape or q.shape[1] % k.shape[1]:
        raise ValueError(f"tilepilot::attention: needs q [B, H, S, D], k = v [B, Hkv, Skv, D] "
                         f"with Hkv dividing H, got q {tuple(q.shape)}, k {tuple(k.shape)}, "
                         f"v {tuple(v.shape)}")
    B, H, S, D = q.shape
    Hkv, Skv = k.shape[1], k.shape[2]
    why = _device_reason((q, k, v), {torch.bfloat16: "bf16", torch.float16: "f16"})
    if why is None and scale is not None and not math.isclose(scale, 1 / math.sqrt(D),
                                                              rel_tol=1e-6):
        why = ("scale", f"scale={scale} is not 1/sqrt(D)")
    if why is None and causal and S != Skv:
        why = ("causal_alignment", f"causal with S={S} != Skv={Skv} (SDPA aligns top-left)")
    if why is None:
        shape = {"B": B, "H": H, "Hkv": Hkv, "S": S, "Skv": Skv, "D": D, "causal": int(causal)}
        detail = _decide(("attention",) + tuple(shape.values()) + (q.dtype,), "attention", shape,
                         _DTYPES[q.dtype])
        why = None if detail is None else (detail.split(":")[0], detail)
    if why is not None:
        _fallback("attention", *why)
        # The fake promises a contiguous result; SDPA on transposed views may return other strides.
        return _sdpa(q, k, v, causal, scale).contiguous()
    out = _device.attention(q.contiguous(), k.contiguous(), v.contiguous(), causal, None, None,
                            None, None)
    _count("attention", None)
    return out


@attention.register_fake
def _(q, k, v, causal=False, scale=None):
    return torch.empty_like(q, memory_format=torch.contiguous_format)
