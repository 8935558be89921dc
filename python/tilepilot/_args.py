"""Argument checks shared by the CPU and CUDA paths.

They name the caller's arguments (a, b, q, k, v) and say how to fix the call; the core checks
again and reports what only it knows (supported head sizes, Hkv dividing H, tile configs).
"""
from __future__ import annotations

import math

DTYPE_NAMES = {
    "f32": "f32", "fp32": "f32", "float32": "f32",
    "bf16": "bf16", "bfloat16": "bf16",
    "f16": "f16", "fp16": "f16", "float16": "f16", "half": "f16",
}
LAYOUTS = ("nn", "nt", "tn")
BACKENDS = ("cpu", "cuda")


def dtype_name(dtype) -> str:
    """'bf16' from 'bf16', 'bfloat16', torch.bfloat16, ..."""
    # np.float32 is a class (its name), np.dtype and torch.bfloat16 print their name.
    text = getattr(dtype, "__name__", None) or str(dtype).removeprefix("torch.")
    if text not in DTYPE_NAMES:
        raise ValueError(f"dtype {dtype!r} is not supported; use 'f32', 'bf16' or 'f16'")
    return DTYPE_NAMES[text]


def backend_name(backend: str) -> str:
    if backend not in BACKENDS:
        raise ValueError(f"backend {backend!r} is not known; use 'cpu' (NumPy arrays, the "
                         "CPU interpreter) or 'cuda' (CUDA tensors, an NVIDIA GPU)")
    return backend


def gemm_shape(a_shape, b_shape, layout: str) -> tuple[int, int]:
    """(M, N) of op(a) op(b); ValueError naming what does not fit."""
    if layout not in LAYOUTS:
        raise ValueError(f"gemm: layout={layout!r} is not supported; use 'nn' (a [M, K], "
                         "b [K, N]), 'nt' (b given as [N, K]) or 'tn' (a given as [K, M])")
    if len(a_shape) != 2 or len(b_shape) != 2:
        raise ValueError(f"gemm: a and b must be 2-d matrices, got a.shape={tuple(a_shape)}, "
                         f"b.shape={tuple(b_shape)}")
    (a0, a1), (b0, b1) = a_shape, b_shape
    M, Ka = (a1, a0) if layout == "tn" else (a0, a1)
    N, Kb = (b0, b1) if layout == "nt" else (b1, b0)
    if Ka != Kb:
        need = {"nn": "a [M, K] and b [K, N]", "nt": "a [M, K] and b [N, K]",
                "tn": "a [K, M] and b [K, N]"}[layout]
        raise ValueError(f"gemm: inner dimensions do not agree for layout {layout!r}: "
                         f"a.shape={tuple(a_shape)} has K={Ka}, b.shape={tuple(b_shape)} has "
                         f"K={Kb}; layout {layout!r} needs {need}")
    return M, N


def attention_shapes(q_shape, k_shape, v_shape) -> None:
    for name, s in (("q", q_shape), ("k", k_shape), ("v", v_shape)):
        if len(s) != 4:
            raise ValueError(f"attention: {name} must be 4-d [batch, heads, seq, head_dim], "
                             f"got {name}.shape={tuple(s)}")
    if tuple(k_shape) != tuple(v_shape):
        raise ValueError(f"attention: k and v must have one shape [B, Hkv, Skv, D], got "
                         f"k.shape={tuple(k_shape)}, v.shape={tuple(v_shape)}")
    if q_shape[0] != k_shape[0] or q_shape[3] != k_shape[3]:
        raise ValueError(f"attention: q [B, H, S, D] and k [B, Hkv, Skv, D] must agree on B and "
                         f"D, got q.shape={tuple(q_shape)}, k.shape={tuple(k_shape)}")


def scale_value(scale) -> float:
    """0.0 for the default 1/sqrt(D) (the core's convention), else the positive scale."""
    if scale is None:
        return 0.0
    s = float(scale)
    if not (math.isfinite(s) and s > 0):
        raise ValueError(f"attention: scale={scale!r} must be a positive finite number "
                         "(None: 1/sqrt(head_dim))")
    return s


def config_dict(config) -> dict[str, int] | None:
    """Tile config knobs ({'bm': 64, ...}, see tilepilot.ops()) as ints; None: the default."""
    if config is None:
        return None
    if not isinstance(config, dict):
        raise ValueError(f"config must be a dict of knob -> int (see tilepilot.ops()), got "
                         f"{type(config).__name__}")
    out = {}
    for k, v in config.items():
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError(f"config[{k!r}]={v!r} must be an int")
        out[str(k)] = v
    return out


def shape_text(shape) -> dict[str, str]:
    """{'M': '77', ...} from a dict or 'M=77,N=45,K=133' (bools as 0/1, lens lists colon-joined)."""
    if isinstance(shape, str):
        pairs = [p for p in shape.split(",") if p.strip()]
        out = {}
        for p in pairs:
            if "=" not in p:
                raise ValueError(f"shape entry {p!r} is not key=value (e.g. 'M=77,N=45,K=133')")
            k, v = p.split("=", 1)
            out[k.strip()] = v.strip()
        return out
    if not isinstance(shape, dict):
        raise ValueError(f"shape must be a dict ({{'M': 77, ...}}) or a 'k=v,...' string, got "
                         f"{type(shape).__name__}")
    out = {}
    for k, v in shape.items():
        if isinstance(v, bool):
            v = int(v)
        elif isinstance(v, (list, tuple)):
            v = ":".join(str(int(x)) for x in v)
        out[str(k)] = str(v)
    return out
