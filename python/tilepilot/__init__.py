"""TilePilot from Python: the tile-language GEMM and attention kernels.

    import numpy as np, tilepilot
    a = np.random.rand(77, 133).astype(np.float32)
    b = np.random.rand(133, 45).astype(np.float32)
    c = tilepilot.gemm(a, b, dtype="bf16")          # the kernel on the CPU interpreter
    print(tilepilot.check("gemm", "M=77,N=45,K=133")["passed"])

backend='cpu' runs NumPy arrays through the CPU reference interpreter; backend='cuda' runs CUDA
tensors (DLPack: torch, ...) through the runtime dispatch (the released pinned kernel inside its
tested matrix, the fallback outside). With torch installed, `tilepilot.torch_ops` registers
torch.ops.tilepilot.gemm / .attention for eager use and torch.compile.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import logging
import sys

from . import _args, _core, _device, _host
from .plugins import load_plugin

__version__ = _core.version
__all__ = ["gemm", "attention", "check", "ops", "env", "configure", "pin_defaults", "decide",
           "counters", "dispatch_summary", "reset_counters", "load_plugin", "DeviceFault",
           "DeviceOutOfMemory"]

# The GPU stopped a kernel (trap, illegal address, time limit): the CUDA context is lost, so the
# process cannot run GPU work again. A RuntimeError.
DeviceFault = _core.DeviceFault
# Device memory ran out at an allocation or a launch: the problem is too large for the GPU's
# free memory. A MemoryError.
DeviceOutOfMemory = _core.DeviceOutOfMemory


def gemm(a, b, layout: str = "nn", backend: str = "cpu", *, dtype=None, config=None, out=None,
         stream=None):
    """C = op(a) op(b); layout 'nn' (a [M, K], b [K, N]), 'nt' (b is [N, K]), 'tn' (a is [K, M]).

    cpu: float32 NumPy arrays; dtype 'f32' (default), 'bf16' or 'f16' rounds inputs and stores
    like the GPU; config picks tile knobs (see ops()). Returns a float32 array.
    cuda: CUDA tensors of one dtype (bf16, f16, f32); returns a new tensor (or fills out=),
    enqueued on the current torch stream (or stream=).
    """
    if _args.backend_name(backend) == "cpu":
        if out is not None or stream is not None:
            raise ValueError("out= and stream= apply to backend='cuda' only")
        return _host.gemm(a, b, layout, dtype, config)
    if config is not None:
        raise ValueError("config= applies to backend='cpu'; on 'cuda' the release's pinned "
                         "config is used (see configure())")
    return _device.gemm(a, b, layout, dtype, out, stream)


def attention(q, k, v, causal: bool = False, scale=None, backend: str = "cpu", *, dtype=None,
              lens=None, config=None, return_lse: bool = False, out=None, stream=None):
    """O = softmax(scale q k^T + mask) v; q [B, H, S, D], k and v [B, Hkv, Skv, D], Hkv | H.

    causal is bottom-right aligned (key j is visible to query i when j <= i + Skv - S), which
    is SDPA's is_causal when S == Skv. scale None: 1/sqrt(D).
    cpu: float32 NumPy arrays computed in dtype 'bf16' (default) or 'f16'; lens gives per-batch
    key lengths (padded batches); return_lse also returns the log-sum-exp [B, H, S].
    cuda: CUDA tensors (bf16/f16) through dispatch; scale must be the default.
    """
    if _args.backend_name(backend) == "cpu":
        if out is not None or stream is not None:
            raise ValueError("out= and stream= apply to backend='cuda' only")
        return _host.attention(q, k, v, causal, scale, lens, dtype, config, return_lse)
    for name, val in (("lens", lens), ("config", config)):
        if val is not None:
            raise ValueError(f"{name}= applies to backend='cpu' only")
    if return_lse:
        raise ValueError("return_lse applies to backend='cpu' only")
    return _device.attention(q, k, v, causal, scale, dtype, out, stream)


def check(op: str, shape, dtype="bf16", backend: str = "cpu", *, seed: int = 0, config=None,
          atol: float | None = None, rtol: float | None = None) -> dict:
    """`tilepilot check OP --json` as a dict: the operator on seeded inputs against its fp64
    reference (op, shape, dtype, backend, config, max_abs_err, rel_l2_err, atol, rtol, passed,
    ...). shape: {'M': 77, 'N': 45, 'K': 133} or 'M=77,N=45,K=133'."""
    text = _core.check_json(op, _args.shape_text(shape), _args.dtype_name(dtype),
                            _args.backend_name(backend), int(seed), _args.config_dict(config),
                            -1.0 if atol is None else float(atol),
                            -1.0 if rtol is None else float(rtol))
    return json.loads(text)


def ops() -> list[dict]:
    """The operators: name, summary, shape_keys, config_space (as `tilepilot ops --json`)."""
    return json.loads(_core.ops_json())


def env() -> dict:
    """Versions of TilePilot, CUDA pieces and GPUs (as `tilepilot env --json`), plus Python's."""
    e = json.loads(_core.env_json())
    e["python"] = sys.version.split()[0]
    for pkg in ("numpy", "torch", "transformers"):
        try:
            e[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            e[pkg] = "not installed"
    e["extension"] = _core.__file__
    return e


def configure(releases=None, force_fallback=(), disable_libraries=()) -> None:
    """Replace the CUDA dispatcher: release folders (None: $TILEPILOT_RELEASE, ':'-separated),
    operators forced to the fallback, libraries treated as missing ('NVRTC', 'cuBLASLt',
    'cuDNN'). Counters start from zero."""
    if releases is None:
        import os
        releases = [d for d in os.environ.get("TILEPILOT_RELEASE", "").split(":") if d]
    elif isinstance(releases, str):
        releases = [releases]
    _core.configure([str(r) for r in releases], set(force_fallback), set(disable_libraries))
    if "tilepilot.torch_ops" in sys.modules:
        sys.modules["tilepilot.torch_ops"].clear_decisions()


def pin_defaults(op: str, shapes, dtype="bf16", device: bool = True) -> dict:
    """Pin problems to the operator's default config, without a release folder.

    Installs into the CUDA dispatcher (the one configure() replaces) an in-memory release of
    `op` that pins each shape to the operator's default config for the current GPU (device=True)
    or for the CPU interpreter (device=False), recorded as tested and passed - as the C++ model
    path's --pin-defaults does. The pins are defaults, not a pilot's measured decision. They
    replace any release `op` had (a folder from configure() or earlier pins); other operators
    keep theirs; configure() drops them.

    shapes: a list of shapes as decide() takes them ({'M': 77, ...} or 'M=77,N=45,K=133'); a
    single shape is taken as a list of one. Returns {'op', 'dtype', 'device', 'arch', 'source':
    'defaults', 'pins': [{'shape', 'config'}], 'replaced': the previous release's folder or ''}.
    """
    if isinstance(shapes, (str, dict)):
        shapes = [shapes]
    shapes = list(shapes)
    if not shapes:
        raise ValueError(f"pin_defaults: no {op} shapes given; pass a list of at least one "
                         "(e.g. ['M=4096,N=4096,K=4096'])")
    texts = []
    for i, s in enumerate(shapes):
        try:
            texts.append(_args.shape_text(s))
        except ValueError as e:
            raise ValueError(f"pin_defaults: {op} shape {i} ({s!r}): {e}") from None
    r = _core.pin_defaults(op, texts, _args.dtype_name(dtype), bool(device))
    if "tilepilot.torch_ops" in sys.modules:
        sys.modules["tilepilot.torch_ops"].clear_decisions()
    return r


def decide(op: str, shape, dtype="bf16", device: bool = True) -> dict:
    """Where the dispatcher would send a problem, without running it:
    {'pinned': bool, 'reason': '' or e.g. 'shape_outside_matrix', 'why': str, 'config': {...}}."""
    return _core.decide(op, _args.shape_text(shape), _args.dtype_name(dtype), bool(device))


def counters(op: str) -> dict:
    """What the dispatcher did for `op`: pinned and fallback calls, by reason and implementation."""
    return _core.counters(op)


def dispatch_summary() -> str:
    return _core.dispatch_summary()


def reset_counters() -> None:
    _core.reset_counters()


# torch custom ops, when torch is importable. A broken torch install must not break the CPU API.
torch_ops_error: str | None = "torch is not installed"
if importlib.util.find_spec("torch") is not None:
    try:
        from . import torch_ops  # noqa: F401
        torch_ops_error = None
    except Exception as e:  # ImportError, OSError from a CUDA library mismatch, ...
        torch_ops_error = f"{type(e).__name__}: {e}"
        logging.getLogger("tilepilot").warning("torch is installed but tilepilot.torch_ops did "
                                               "not load: %s", torch_ops_error)

# Plug-ins named in $TILEPILOT_PLUGINS join at import, as they do for the CLI; a broken one is
# reported (and its operators missing), never a failed import.
try:
    from .plugins import load_env_plugins as _load_env_plugins
    _load_env_plugins()
except ValueError as _e:
    logging.getLogger("tilepilot").warning("$TILEPILOT_PLUGINS: %s", _e)
