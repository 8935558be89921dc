"""Host cost of torch op registration styles and of the torch ops' Python checks (issue 17).

Runs anywhere torch runs (CPU tensors, no GPU). It registers one trivial op - attention's
schema, a body that returns a preallocated tensor - under the scratch namespace
`tilepilot_bench` in each registration style below and times one call of each, so the rows
differ only in what the dispatcher and torch's Python wrappers add:

  python          the body as a plain Python function (the floor)
  custom_op       torch.library.custom_op + register_fake (tilepilot.torch_ops before issue 17)
  lib_ce_noag     Library.define + impl at CompositeExplicitAutograd, no Autograd kernel
                  (torch's autograd fallback: a warning and wrong gradients on backward)
  lib_ce_ag       the same + a Python Autograd kernel that redispatches below autograd
  lib_ce_ag_torch the same, its Autograd kernel torch's own (custom_op's, make_autograd_impl)
  lib_cpu_ag      Library.impl at the CPU and CUDA keys + the Python Autograd kernel
  lib_ce_fused    lib_ce_ag whose Autograd kernel runs the body itself for plain CPU/CUDA
                  tensors that need no gradient (fake, meta, traced calls redispatch):
                  tilepilot.torch_ops after issue 17

Then the Python pieces a tilepilot.torch_ops call runs (is_cuda/dtype/device checks,
_core.selected_device, the decision-cache lookup, _count, .contiguous(), .detach(), new_empty)
and finally torch.ops.tilepilot.attention itself on CPU tensors (its early not_cuda fallback,
SDPA included) next to SDPA alone. torch.cuda.current_stream needs CUDA: not timed here.

Timing: `--calls` back-to-back calls per sample, `--repeats` samples, the cases interleaved
within each round so drift hits all alike; the median per call is printed (and the spread).

  python python/scripts/bench_op_dispatch.py [--calls 20000] [--repeats 15] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings

import torch

NS = "tilepilot_bench"
SCHEMA = "(Tensor q, Tensor k, Tensor v, bool causal=False, float? scale=None) -> Tensor"
_OUT = torch.empty(1, 2, 4, 16)  # what every body returns: no allocation, no aliasing


def _body(q, k, v, causal=False, scale=None):
    return _OUT


def _fake(q, k, v, causal=False, scale=None):
    return torch.empty_like(q)


def _register_custom_op():
    op = torch.library.custom_op(f"{NS}::custom_op", mutates_args=())(_typed_body)
    op.register_fake(_fake)
    return getattr(torch.ops, NS).custom_op


def _typed_body(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                scale: float | None = None) -> torch.Tensor:
    return _OUT


def _autograd_kernel(packet_name, fused):
    """A Python Autograd kernel: redispatch below autograd (fused: run the body itself when
    the call has plain CPU/CUDA tensors and needs no gradient); an error on backward."""
    after = torch._C._after_autograd_keyset
    below = torch._C._after_ADInplaceOrView_keyset
    plain_keys = (torch._C.DispatchKey.CPU, torch._C.DispatchKey.CUDA)
    plain: dict[int, bool] = {}
    op = None

    def kernel(keyset, *args):
        nonlocal op
        if torch._C.is_grad_enabled() and torch._C._any_requires_grad(*args):
            raise RuntimeError("no backward")  # the benchmark never asks for gradients
        if fused:
            raw = keyset.raw_repr()
            if raw not in plain:
                plain[raw] = (keyset & below).highestPriorityTypeId() in plain_keys
            if plain[raw]:
                return _body(*args)
        if op is None:
            op = getattr(getattr(torch.ops, NS), packet_name).default
        with torch._C._AutoDispatchBelowAutograd():
            return op.redispatch(keyset & after, *args)
    return kernel


def _register_lib(lib, name, keys, autograd):
    lib.define(name + SCHEMA)
    for key in keys:
        lib.impl(name, _body, key)
    lib._register_fake(name, _fake)
    if autograd in ("python", "fused"):
        lib.impl(name, _autograd_kernel(name, autograd == "fused"), "Autograd",
                 with_keyset=True)
    elif autograd == "torch":
        from torch._library.autograd import Info, make_autograd_impl
        op = getattr(getattr(torch.ops, NS), name).default
        lib.impl(name, make_autograd_impl(op, Info(None, None)), "Autograd", with_keyset=True)
    return getattr(getattr(torch.ops, NS), name)


def registration_cases(lib):
    ce = ["CompositeExplicitAutograd"]
    return {
        "python": _body,
        "custom_op": _register_custom_op(),
        "lib_ce_noag": _register_lib(lib, "lib_ce_noag", ce, None),
        "lib_ce_ag": _register_lib(lib, "lib_ce_ag", ce, "python"),
        "lib_ce_ag_torch": _register_lib(lib, "lib_ce_ag_torch", ce, "torch"),
        "lib_cpu_ag": _register_lib(lib, "lib_cpu_ag", ["CPU", "CUDA"], "python"),
        "lib_ce_fused": _register_lib(lib, "lib_ce_fused", ce, "fused"),
    }


def check_cases(q, k, v):
    """The Python pieces of one tilepilot.torch_ops call, each alone."""
    from tilepilot import _core, torch_ops
    ts = (q, k, v)
    dtypes = {torch.bfloat16: "bf16", torch.float16: "f16"}
    key = ("attention", 2, 16, 8, 1024, 1024, 128, 1, q.dtype)
    cache = {key: None}
    stats: dict = {}

    def count():  # torch_ops._count's work on a private dict
        s = stats.setdefault("attention", {"tilepilot": 0, "fallback": {}})
        s["tilepilot"] += 1

    def verdict_key():  # one key holding all a verdict depends on
        return (q.shape, k.shape, q.dtype, k.dtype, v.dtype, q.device, k.device, v.device,
                q.is_contiguous(), k.is_contiguous(), v.is_contiguous())

    return {
        "all_is_cuda": lambda: all(t.is_cuda for t in ts),
        "dtype_checks": lambda: q.dtype in dtypes and not any(t.dtype != q.dtype for t in ts),
        "device_checks": lambda: any(t.device != q.device for t in ts) or q.device.index != 0,
        "selected_device": _core.selected_device,
        "shape_unpack": lambda: (q.shape, k.shape[1], k.shape[2]),
        "decide_key+lookup": lambda: cache.get(("attention",) + (2, 16, 8, 1024, 1024, 128, 1)
                                               + (q.dtype,)),
        "verdict_key+lookup": lambda: cache.get(verdict_key()),
        "_count": count,
        "torch_ops._count": lambda: torch_ops._count("bench", None),
        "contiguous x3": lambda: (q.contiguous(), k.contiguous(), v.contiguous()),
        "is_contiguous x3": lambda: (q.is_contiguous(), k.is_contiguous(), v.is_contiguous()),
        "detach x3": lambda: (q.detach(), k.detach(), v.detach()),
        "new_empty": lambda: q.new_empty(tuple(q.shape)),
        "empty_like": lambda: torch.empty_like(q),
    }


def time_cases(cases, calls, repeats):
    samples = {name: [] for name in cases}
    for _ in range(repeats):
        for name, fn in cases.items():
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            samples[name].append((time.perf_counter() - t0) / calls * 1e6)
    return {name: (statistics.median(s), min(s), max(s)) for name, s in samples.items()}


def report(title, rows, out):
    print(f"\n{title} (us per call: median [min, max])")
    for name, (med, lo, hi) in rows.items():
        print(f"  {name:<20} {med:8.3f}   [{lo:.3f}, {hi:.3f}]")
        out.append({"table": title, "case": name, "median_us": med, "min_us": lo, "max_us": hi})


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--json", help="write the rows as JSON here")
    args = ap.parse_args()
    torch.set_num_threads(1)
    rows: list[dict] = []
    q, k, v = torch.randn(1, 2, 4, 16), torch.randn(1, 2, 4, 16), torch.randn(1, 2, 4, 16)

    lib = torch.library.Library(NS, "FRAGMENT")
    cases = registration_cases(lib)
    for name, fn in cases.items():  # every style gives the body's result
        assert fn(q, k, v, True) is _OUT, name
    report("registration styles, op(q, k, v, True)",
           time_cases({n: (lambda f=f: f(q, k, v, True)) for n, f in cases.items()},
                      args.calls, args.repeats), rows)
    report("the same through the .default overload",
           time_cases({n: (lambda f=f.default: f(q, k, v, True)) for n, f in cases.items()
                       if n != "python"}, args.calls, args.repeats), rows)

    try:
        import tilepilot  # noqa: F401
    except ImportError as e:
        print(f"\ntilepilot is not importable ({e}): the check and op rows are skipped")
    else:
        report("python checks of a torch_ops call (CPU tensors [1, 2, 4, 16])",
               time_cases(check_cases(q, k, v), args.calls, args.repeats), rows)
        report("whole calls on CPU tensors (the op takes its not_cuda fallback)",
               time_cases(whole_calls(q, k, v), max(args.calls // 10, 1), args.repeats), rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch": torch.__version__, "calls": args.calls,
                       "repeats": args.repeats, "rows": rows}, f, indent=1)
    return 0


def whole_calls(q, k, v):
    import logging
    logging.getLogger("tilepilot").setLevel(logging.ERROR)  # the fallback logs once anyway
    sdpa = torch.nn.functional.scaled_dot_product_attention
    op = torch.ops.tilepilot.attention
    return {
        "sdpa": lambda: sdpa(q, k, v, is_causal=True),
        "sdpa.contiguous()": lambda: sdpa(q, k, v, is_causal=True).contiguous(),
        "tilepilot.attention": lambda: op(q, k, v, True),
    }


if __name__ == "__main__":
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sys.exit(main())
