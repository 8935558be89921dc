"""Plug-ins from Python: tilepilot.load_plugin(path) registers a plug-in's operators (see
docs/operators.md) and, with torch installed, makes each callable on torch tensors as
torch.ops.tilepilot.<name>(inputs, options) -> list of outputs.

The torch op runs the operator on CUDA tensors through TilePilot's dispatch (the released
kernel inside its tested matrix, else the operator's framework fallback) and on CPU tensors
through the CPU interpreter. Its fake implementation allocates the outputs from the operator's
own description of the call, so torch.compile traces it as one opaque op.
"""
# No `from __future__ import annotations`: torch.library reads the op's annotations as types.
import os

from . import _core, _device

_loaded: dict[str, list[str]] = {}  # plug-in path -> operators it registered


def load_plugin(path) -> list[str]:
    """Loads the plug-in at `path` (once); returns the operators it registered."""
    key = os.path.realpath(os.fspath(path))
    if key not in _loaded:
        names = list(_core.load_plugin(os.fspath(path)))
        try:
            import torch  # noqa: F401
        except ImportError:
            pass
        else:
            for name in names:
                _register_torch_op(name)
        _loaded[key] = names
    return list(_loaded[key])


def _options(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in filter(None, text.split(",")):
        k, eq, v = item.partition("=")
        if not eq or not k or not v:
            raise ValueError(f"options {text!r}: {item!r} is not key=value")
        out[k] = v
    return out


def _register_torch_op(name: str) -> None:
    import torch

    names = {torch.bfloat16: "bf16", torch.float16: "f16", torch.float32: "f32",
             torch.int32: "i32", torch.int8: "i8", torch.uint8: "u8"}
    back = {v: k for k, v in names.items()}

    def describe(inputs, options):
        for i, t in enumerate(inputs):
            if t.dtype not in names:
                raise ValueError(f"tilepilot::{name}: input {i} has dtype {t.dtype}; use one of "
                                 f"{sorted(str(d) for d in names)}")
        return _core.describe_call(name, [[int(s) for s in t.shape] for t in inputs],
                                   [names[t.dtype] for t in inputs], _options(options))

    @torch.library.custom_op(f"tilepilot::{name}", mutates_args=())
    def op(inputs: list[torch.Tensor], options: str = "") -> list[torch.Tensor]:
        keys, outs, idx = describe(inputs, options)
        if inputs and all(t.is_cuda for t in inputs):
            dev = inputs[0].device
            results = [torch.empty(shape, dtype=back[dt], device=dev) for dt, shape in outs]
            # DLPack export refuses a tensor that requires grad (it may, inside the op).
            ready = ((t.detach() if t.requires_grad else t).contiguous() for t in inputs)
            args, it_in, it_out = [], iter(ready), iter(results)
            for i in range(len(inputs) + len(outs)):
                args.append(next(it_out) if i in idx else next(it_in))
            stream = _device.torch_stream(dev.index)
            _core.run_cuda(name, args, _options(options), stream)
            return results
        arrays = [t.detach().to(torch.float32).contiguous().numpy() for t in inputs]
        dtype = names[inputs[0].dtype]
        got = _core.run_host(name, keys, dtype, arrays, None)
        return [torch.from_numpy(g).to(back[dt]) for g, (dt, _) in zip(got, outs)]

    @op.register_fake
    def _(inputs, options=""):
        _, outs, _ = describe(inputs, options)
        dev = inputs[0].device if inputs else "cpu"
        return [torch.empty(shape, dtype=back[dt], device=dev) for dt, shape in outs]


def load_env_plugins() -> list[str]:
    """Loads every plug-in named in $TILEPILOT_PLUGINS (':'-separated)."""
    names: list[str] = []
    for p in filter(None, os.environ.get("TILEPILOT_PLUGINS", "").split(":")):
        names += load_plugin(p)
    return names
