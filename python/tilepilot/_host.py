"""The CPU backend: NumPy arrays through the operators' kernels on the CPU interpreter.

Inputs are float32 (float16 arrays are accepted and read exactly). With dtype='bf16' or 'f16'
the values are rounded to that type on the way in and every store inside the kernel rounds as
the GPU does, so the float32 result holds exactly what the GPU kernel would write.
"""
from __future__ import annotations

import numpy as np

from . import _args, _core


def _array(x, name: str) -> np.ndarray:
    if not isinstance(x, np.ndarray):
        if getattr(x, "is_cuda", False) or hasattr(x, "__cuda_array_interface__"):
            raise ValueError(f"{name} is a CUDA tensor; backend='cpu' takes NumPy arrays (pass "
                             f"backend='cuda', or {name}.cpu().numpy())")
        try:
            x = np.asarray(x)
        except Exception as e:  # e.g. a bf16 torch tensor: NumPy has no bfloat16
            raise ValueError(f"{name} ({type(x).__name__}) cannot be read as a NumPy array: {e}; "
                             "pass float32 NumPy arrays") from None
    if x.dtype not in (np.float32, np.float16):
        raise ValueError(f"{name} has dtype {x.dtype}; backend='cpu' takes float32 arrays (pass "
                         f"{name}.astype(np.float32), and dtype='bf16' or 'f16' to compute in "
                         "that type)")
    return x


def _dtype(dtype, arrays, default: str) -> str:
    if dtype is not None:
        return _args.dtype_name(dtype)
    return "f16" if any(a.dtype == np.float16 for a in arrays) else default


def _f32(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.float32)


def gemm(a, b, layout: str, dtype, config) -> np.ndarray:
    a, b = _array(a, "a"), _array(b, "b")
    _args.gemm_shape(a.shape, b.shape, layout)
    dt = _dtype(dtype, (a, b), "f32")
    m = a.shape[1] if layout == "tn" else a.shape[0]
    k = a.shape[0] if layout == "tn" else a.shape[1]
    n = b.shape[0] if layout == "nt" else b.shape[1]
    keys = {"M": str(m), "N": str(n), "K": str(k), "layout": layout}
    (c,) = _core.run_host("gemm", keys, dt, [_f32(a), _f32(b)], _args.config_dict(config))
    return c


def attention(q, k, v, causal: bool, scale, lens, dtype, config, return_lse: bool):
    q, k, v = _array(q, "q"), _array(k, "k"), _array(v, "v")
    _args.attention_shapes(q.shape, k.shape, v.shape)
    # The kernel computes in bf16 or f16 only; bf16 is what the GPU path runs by default.
    dt = _dtype(dtype, (q, k, v), "bf16")
    if lens is not None:
        lens = [int(x) for x in lens]
        if len(lens) != q.shape[0]:
            raise ValueError(f"attention: lens has {len(lens)} entries but the batch is "
                             f"{q.shape[0]}; give one key length per batch entry")
    b, h, s, d = q.shape
    keys = {"B": str(b), "H": str(h), "S": str(s), "D": str(d), "Hkv": str(k.shape[1]),
            "Skv": str(k.shape[2]), "causal": "1" if causal else "0",
            "lse": "1" if return_lse else "0"}
    sc = _args.scale_value(scale)
    if sc:
        keys["scale"] = repr(float(sc))
    inputs = [_f32(q), _f32(k), _f32(v)]
    if lens is not None:
        keys["lens"] = ":".join(str(x) for x in lens)
        inputs.append(np.asarray(lens, dtype=np.float32))
    outs = _core.run_host("attention", keys, dt, inputs, _args.config_dict(config))
    return (outs[0], outs[1]) if return_lse else outs[0]
