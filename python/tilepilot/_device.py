"""The CUDA backend: DLPack device tensors through tp::ops dispatch, without copies.

Outputs are allocated next to the inputs when those are torch tensors (else pass `out=`), and
the work is enqueued on the caller's current torch stream (else `stream=`, a CUstream handle as
an int; 0 is the default stream), so it orders with the caller's other GPU work.
"""
from __future__ import annotations

import math
import sys

from . import _args, _core

_cuda_ok: str | None = None  # the device description once a GPU was found


def require_cuda() -> None:
    """RuntimeError saying why when there is no usable GPU (checked once, then remembered)."""
    global _cuda_ok
    if _cuda_ok:
        return
    ok, what = _core.cuda_status()
    if not ok:
        raise RuntimeError(f"backend='cuda' needs an NVIDIA GPU: {what}. Without one, use "
                           "backend='cpu' (NumPy arrays on the CPU interpreter)")
    _cuda_ok = what


def _torch_tensor(x):
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _prepare(x, name: str):
    if _torch_tensor(x):
        if not x.is_cuda:
            raise ValueError(f"{name} is on {x.device}; backend='cuda' takes CUDA tensors "
                             f"({name}.cuda()), backend='cpu' takes NumPy arrays")
        # DLPack export refuses tensors that require grad; detach() makes a view, no copy, but
        # costs a microsecond (issue 17), so only where needed.
        return x.detach() if x.requires_grad else x
    if not hasattr(x, "__dlpack__"):
        raise ValueError(f"{name} ({type(x).__name__}) is not a DLPack tensor; backend='cuda' "
                         "takes CUDA tensors (torch.Tensor on cuda, or any __dlpack__ object)")
    return x


def _stream(x, stream) -> int:
    if stream is not None:
        return int(stream)
    if _torch_tensor(x):
        return torch_stream(x.device.index)
    return 0


def _raw_stream_getter():
    import torch
    torch.cuda.init()  # what torch.cuda.current_stream does first (once is enough)
    # The raw handle without a torch.cuda.Stream object (a few microseconds less per call);
    # private to torch (its generated Inductor code uses it), hence the public way as fallback.
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return raw or (lambda index: torch.cuda.current_stream(index).cuda_stream)


_raw_stream = None


def torch_stream(device_index: int) -> int:
    """The CUstream handle of torch's current stream on CUDA device `device_index`."""
    global _raw_stream
    if _raw_stream is None:
        _raw_stream = _raw_stream_getter()
    return _raw_stream(device_index)


def run_torch(op: str, tensors, options: dict) -> None:
    """Enqueues `op` on torch CUDA tensors (inputs, then the outputs it writes) on their device's
    current torch stream. For tilepilot.torch_ops, which has made gemm()'s and attention()'s
    checks once per call signature: none are repeated here. The tensors must not require grad,
    and be contiguous except where the operator reads views in place (attention's q, k, v)."""
    _core.run_cuda(op, tensors, options, torch_stream(tensors[0].device.index))


def _output(like, shape, out, dtype):
    if out is not None:
        out = _prepare(out, "out")
        if tuple(out.shape) != tuple(shape):
            raise ValueError(f"out.shape={tuple(out.shape)} but the result is {tuple(shape)}")
        return out
    if _torch_tensor(like):
        return like.new_empty(shape)
    raise ValueError("backend='cuda' with non-torch tensors needs out= (a CUDA tensor of the "
                     f"result's shape {tuple(shape)} and the inputs' dtype)")


def _check_dtype(dtype, x) -> None:
    if dtype is not None and _args.dtype_name(dtype) != _args.dtype_name(x.dtype):
        raise ValueError(f"dtype={dtype!r} but the tensors are {x.dtype}; on backend='cuda' the "
                         "tensors' own dtype is used (convert them, e.g. .to(torch.bfloat16))")


def gemm(a, b, layout: str, dtype, out, stream):
    a, b = _prepare(a, "a"), _prepare(b, "b")
    M, N = _args.gemm_shape(a.shape, b.shape, layout)
    _check_dtype(dtype, a)
    require_cuda()
    out = _output(a, (M, N), out, dtype)
    _core.run_cuda("gemm", [a, b, out], {"layout": layout}, _stream(a, stream))
    return out


def attention(q, k, v, causal: bool, scale, dtype, out, stream):
    q, k, v = _prepare(q, "q"), _prepare(k, "k"), _prepare(v, "v")
    _args.attention_shapes(q.shape, k.shape, v.shape)
    _check_dtype(dtype, q)
    s = _args.scale_value(scale)
    if s and not math.isclose(s, 1 / math.sqrt(q.shape[3]), rel_tol=1e-6):
        # The dispatched kernels and their fallbacks use 1/sqrt(D); a hook for other scales
        # belongs in tp::ops::attention, not in a silent pre-scaled copy of q here.
        raise ValueError(f"attention: scale={scale} is not supported on backend='cuda' (only "
                         f"1/sqrt(head_dim) = {1 / math.sqrt(q.shape[3]):.6g}); tilepilot.torch_ops"
                         " falls back to PyTorch SDPA for other scales")
    require_cuda()
    out = _output(q, tuple(q.shape), out, dtype)
    _core.run_cuda("attention", [q, k, v, out], {"causal": "1" if causal else "0"},
                   _stream(q, stream))
    return out
