"""torch.ops.tilepilot.gemm and torch.ops.tilepilot.attention as PyTorch custom ops.

Registered through torch.library.Library - a schema, one kernel for all backends, a fake (meta)
implementation and an Autograd kernel - so torch.compile traces them as single opaque ops. A
call runs TilePilot's released kernel only inside the released envelope - CUDA tensors on
TilePilot's device, one supported dtype, and a problem the dispatcher's release pins
(tilepilot.decide) - and otherwise falls back to torch.matmul / F.scaled_dot_product_attention,
logged once per reason on the "tilepilot" logger. The ops have no derivative: a backward through
one raises.

attention follows SDPA's meaning: is_causal is top-left aligned, which TilePilot's
(bottom-right) causal mask equals only when S == Skv, so causal calls with S != Skv fall back.

Host time per call matters (issue 17: a few microseconds beside a kernel launch), hence the
verdict cache and the Autograd kernel that runs the op itself on the plain eager path.
"""
from __future__ import annotations

import logging
import math
from typing import Optional

import torch
import torch.nn.functional as F

from . import _args, _core, _device

log = logging.getLogger("tilepilot")

_DTYPES = {torch.bfloat16: "bf16", torch.float16: "f16", torch.float32: "f32"}
_ATTENTION_DTYPES = {torch.bfloat16: "bf16", torch.float16: "f16"}
_FALLBACK_IMPL = {"gemm": "torch.matmul", "attention": "F.scaled_dot_product_attention"}
_decisions: dict[tuple, Optional[str]] = {}  # problem -> None (pinned) or why not
# Call signature (op, shapes, dtypes, devices, scalar arguments) -> None (TilePilot runs it) or
# (reason, detail): a repeated call costs one dict lookup instead of the checks.
_verdicts: dict[tuple, Optional[tuple[str, str]]] = {}
_UNKNOWN = object()
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
    _verdicts.clear()


def _fallback(op: str, reason: str, detail: str) -> None:
    _count(op, reason)
    if (op, reason) not in _logged:
        _logged.add((op, reason))
        log.warning("%s falls back to %s (%s): %s [logged once per reason]", op,
                    _FALLBACK_IMPL[op], reason, detail)


def _verdict(key: tuple, compute, *args) -> Optional[tuple[str, str]]:
    """compute(*args), remembered under `key`. Not remembered: errors (raised again on every
    call), no_gpu (require_cuda looks again until a GPU is found) and keys holding a NaN (which
    would never be found again, so each call would add one)."""
    why = _verdicts.get(key, _UNKNOWN)
    if why is _UNKNOWN:
        why = compute(*args)
        if (why is None or why[0] != "no_gpu") and all(x == x for x in key):
            _verdicts[key] = why
    return why


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


def _reason(detail: Optional[str]) -> Optional[tuple[str, str]]:
    return None if detail is None else (detail.split(":")[0], detail)


def _exportable(t: torch.Tensor) -> torch.Tensor:
    """t as run_cuda takes it: contiguous, and detached when it requires grad (DLPack export
    refuses such tensors; under no_grad they reach the kernel)."""
    t = t.contiguous()
    return t.detach() if t.requires_grad else t


def _view(t: torch.Tensor) -> torch.Tensor:
    """t as the attention kernel reads it in place: contiguous, or a view with a unit innermost
    stride, positive strides and a 16-byte aligned start (PyTorch's [B, S, H, D] projections
    viewed as [B, H, S, D] are such views); else a contiguous copy. Detached when it requires
    grad. The contiguous case is checked first: it costs one call."""
    if not t.is_contiguous():
        st = t.stride()
        if st[-1] != 1 or min(st) <= 0 or t.data_ptr() % 16:
            t = t.contiguous()
    return t.detach() if t.requires_grad else t


# --- gemm -----------------------------------------------------------------------------------


def _torch_gemm(a, b, layout):
    return torch.matmul(a.t() if layout == "tn" else a, b.t() if layout == "nt" else b)


def _gemm_mn(a, b, layout):
    return (a.shape[1] if layout == "tn" else a.shape[0],
            b.shape[0] if layout == "nt" else b.shape[1])


def _gemm_verdict(a, b, layout) -> Optional[tuple[str, str]]:
    if layout not in ("nn", "nt", "tn") or a.dim() != 2 or b.dim() != 2:
        raise ValueError(f"tilepilot::gemm: needs 2-d a, b and layout nn|nt|tn, got "
                         f"a {tuple(a.shape)}, b {tuple(b.shape)}, layout {layout!r}")
    why = _device_reason((a, b), _DTYPES)
    if why is not None:
        return why
    (M, N), K = _gemm_mn(a, b, layout), (a.shape[0] if layout == "tn" else a.shape[1])
    why = _reason(_decide(("gemm", M, N, K, layout, a.dtype), "gemm",
                          {"M": M, "N": N, "K": K, "layout": layout}, _DTYPES[a.dtype]))
    if why is None:  # the checks tilepilot.gemm(backend='cuda') makes, with its errors
        _args.gemm_shape(a.shape, b.shape, layout)
    return why


def _gemm(a, b, layout="nn"):
    """op(a) op(b) with layout 'nn' | 'nt' | 'tn' (see tilepilot.gemm)."""
    why = _verdict(("gemm", a.shape, b.shape, a.dtype, b.dtype, a.device, b.device, layout),
                   _gemm_verdict, a, b, layout)
    if why is not None:
        _fallback("gemm", *why)
        return _torch_gemm(a, b, layout).contiguous()
    a, b = _exportable(a), _exportable(b)
    out = a.new_empty(_gemm_mn(a, b, layout))
    _device.run_torch("gemm", [a, b, out], {"layout": layout})
    _count("gemm", None)
    return out


def _gemm_fake(a, b, layout="nn"):
    return a.new_empty(_gemm_mn(a, b, layout))


# --- attention ------------------------------------------------------------------------------


def _sdpa(q, k, v, causal, scale):
    if q.shape[1] != k.shape[1]:  # grouped heads: SDPA's enable_gqa needs torch >= 2.5
        rep = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)


def _attention_verdict(q, k, v, causal, scale) -> Optional[tuple[str, str]]:
    if q.dim() != 4 or k.dim() != 4 or k.shape != v.shape or q.shape[1] % k.shape[1]:
        raise ValueError(f"tilepilot::attention: needs q [B, H, S, D], k = v [B, Hkv, Skv, D] "
                         f"with Hkv dividing H, got q {tuple(q.shape)}, k {tuple(k.shape)}, "
                         f"v {tuple(v.shape)}")
    B, H, S, D = q.shape
    Hkv, Skv = k.shape[1], k.shape[2]
    why = _device_reason((q, k, v), _ATTENTION_DTYPES)
    if why is None and scale is not None and not math.isclose(scale, 1 / math.sqrt(D),
                                                              rel_tol=1e-6):
        why = ("scale", f"scale={scale} is not 1/sqrt(D)")
    if why is None and causal and S != Skv:
        why = ("causal_alignment", f"causal with S={S} != Skv={Skv} (SDPA aligns top-left)")
    if why is not None:
        return why
    shape = {"B": B, "H": H, "Hkv": Hkv, "S": S, "Skv": Skv, "D": D, "causal": int(causal)}
    why = _reason(_decide(("attention",) + tuple(shape.values()) + (q.dtype,), "attention",
                          shape, _DTYPES[q.dtype]))
    if why is None:  # the checks tilepilot.attention(backend='cuda') makes, with its errors
        _args.attention_shapes(q.shape, k.shape, v.shape)
    return why


def _attention(q, k, v, causal=False, scale=None):
    """SDPA-compatible attention: q [B, H, S, D], k and v [B, Hkv, Skv, D] (Hkv divides H)."""
    why = _verdict(("attention", q.shape, k.shape, v.shape, q.dtype, k.dtype, v.dtype, q.device,
                    k.device, v.device, causal, scale), _attention_verdict, q, k, v, causal, scale)
    # The result has q's layout, as the fake promises (empty_like): for [B, S, H, D] projections
    # viewed per head, O is [B, S, H, D] memory too, so the model's transpose back is free.
    out = torch.empty_like(q)
    if why is not None:
        _fallback("attention", *why)
        r = _sdpa(q, k, v, causal, scale)
        return r if r.stride() == out.stride() else out.copy_(r)
    q, k, v = _view(q), _view(k), _view(v)
    st = out.stride()
    # The kernel writes O in place where it can (unit innermost stride, positive strides).
    dst = out if st[-1] == 1 and min(st) > 0 else torch.empty(q.shape, dtype=q.dtype,
                                                               device=q.device)
    _device.run_torch("attention", [q, k, v, dst], {"causal": "1" if causal else "0"})
    _count("attention", None)
    return out if dst is out else out.copy_(dst)


def _attention_fake(q, k, v, causal=False, scale=None):
    return torch.empty_like(q)


# --- registration ---------------------------------------------------------------------------

_lib = torch.library.Library("tilepilot", "FRAGMENT")  # kept: dropping it unregisters the ops
_AFTER_AUTOGRAD = torch._C._after_autograd_keyset
_BELOW_AUTOGRAD = torch._C._after_ADInplaceOrView_keyset
_PLAIN_BACKENDS = (torch._C.DispatchKey.CPU, torch._C.DispatchKey.CUDA)


class _NoBackward(torch.autograd.Function):
    """Runs an op below autograd for inputs that require grad; its backward raises, so a
    gradient through a TilePilot op is an error, never a silent zero."""

    @staticmethod
    def forward(ctx, op, keyset, *args):
        ctx.op_name = op._schema.name
        with torch._C._AutoDispatchBelowAutograd():
            return op.redispatch(keyset & _AFTER_AUTOGRAD, *args)

    @staticmethod
    def backward(ctx, *grads):
        name = ctx.op_name.split("::")[-1]
        raise RuntimeError(f"Trying to backward through {ctx.op_name}, which has no autograd "
                           f"formula (TilePilot's torch ops are for inference); use "
                           f"{_FALLBACK_IMPL.get(name, 'torch')} where gradients are needed")


def _autograd_kernel(op, kernel):
    """The op's Autograd kernel. With plain CPU/CUDA tensors and no gradient wanted it calls
    `kernel` itself: one Python call from the dispatcher instead of custom_op's chain of
    wrappers and a redispatch. Anything else below autograd - fake or meta tensors, tracing
    modes, functionalization, functorch - redispatches to the registered kernels."""
    plain: dict[int, bool] = {}  # DispatchKeySet.raw_repr() -> nothing between autograd and
    #                              the CPU/CUDA backend (few keysets ever occur)
    grad_enabled, any_requires_grad = torch._C.is_grad_enabled, torch._C._any_requires_grad

    def autograd(keyset, *args):
        if grad_enabled() and any_requires_grad(*args):
            return _NoBackward.apply(op, keyset, *args)
        raw = keyset.raw_repr()
        direct = plain.get(raw)
        if direct is None:
            direct = plain[raw] = (keyset & _BELOW_AUTOGRAD).highestPriorityTypeId() in \
                _PLAIN_BACKENDS
        if direct:
            return kernel(*args)
        with torch._C._AutoDispatchBelowAutograd():
            return op.redispatch(keyset & _AFTER_AUTOGRAD, *args)
    return autograd


def _define(name: str, schema: str, kernel, fake):
    """Registers tilepilot::<name>: `kernel` for every backend, `fake` for fake and meta tensors
    (torch.compile), and the Autograd kernel above; returns torch.ops.tilepilot.<name>."""
    # pt2_compliant as custom_op tags its ops: the op is safe to trace as one node.
    _lib.define(name + schema, tags=(torch.Tag.pt2_compliant_tag,))
    _lib.impl(name, kernel, "CompositeExplicitAutograd")
    torch.library.register_fake(f"tilepilot::{name}", fake, lib=_lib)
    packet = getattr(torch.ops.tilepilot, name)
    _lib.impl(name, _autograd_kernel(packet.default, kernel), "Autograd", with_keyset=True)
    return packet


gemm = _define("gemm", '(Tensor a, Tensor b, str layout="nn") -> Tensor', _gemm, _gemm_fake)
attention = _define("attention", "(Tensor q, Tensor k, Tensor v, bool causal=False, "
                    "float? scale=None) -> Tensor", _attention, _attention_fake)
