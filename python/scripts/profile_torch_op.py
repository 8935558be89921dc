"""Host cost of one torch.ops.tilepilot.attention / .gemm call, split into its layers (issue 17).

Runs on a CUDA machine with the package installed. For the attention of one transformers Llama
layer (default: batch 2 x 1024 tokens, 16/8 heads of 128, bf16, causal; q/k/v as transformers
makes them: [B, S, H, D] projections viewed as [B, H, S, D], so not contiguous) it times, per
call, each layer of the path from the outside in:

  sdpa          F.scaled_dot_product_attention on the same views (GQA through enable_gqa)
  op            torch.ops.tilepilot.attention on the views (what tilepilot.hf calls)
  op_contig     the same op on contiguous q/k/v (no .contiguous() copies inside)
  device        tilepilot._device.attention on contiguous tensors (no custom-op dispatch)
  core          tilepilot._core.run_cuda with a preallocated output and a stream handle
  contiguous    the three .contiguous() copies alone
  stream_torch  torch.cuda.current_stream(dev).cuda_stream (what _device used before issue 17)
  stream_raw    tilepilot._device.torch_stream(index) (what it uses now)

and the same layers for the layer's q projection as a gemm (x [B*S, H*D] times the weight
[H*D, H*D] given as [N, K], layout 'nt', pinned like the attention):

  matmul        x @ w.t() (torch's own host cost for the same product)
  gemm_op       torch.ops.tilepilot.gemm(x, w, "nt")
  gemm_device   tilepilot._device.gemm (no custom-op dispatch)
  gemm_core     tilepilot._core.run_cuda with a preallocated output and a stream handle

The gemm rows are left out, with a note, when the gemm op falls back (the attention rows stay).

Each row gives the host time per call (perf_counter over N back-to-back calls, divided by N,
without a synchronize inside: what the CPU spends enqueueing) and the GPU time per call (CUDA
events around the same N calls, so it includes any GPU idle time the host path causes). Then a
cProfile of N `op` calls lists the Python functions that took the host time.

  python python/scripts/profile_torch_op.py [--batch 2 --seq 1024 --heads 16 --kv-heads 8]
                                            [--calls 200] [--json out.json]
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--json", help="write the rows as JSON here")
    args = ap.parse_args()

    def stage(what):  # where a crash happened, when one does
        print(f"-- {what}", flush=True)

    stage("import torch")
    import torch
    import torch.nn.functional as F
    if not torch.cuda.is_available():
        print("profile_torch_op: needs a CUDA GPU", file=sys.stderr)
        return 2
    stage("import tilepilot")
    import tilepilot
    from tilepilot import _core, _device
    if tilepilot.torch_ops_error:
        print(f"profile_torch_op: tilepilot.torch_ops did not load: {tilepilot.torch_ops_error}",
              file=sys.stderr)
        return 2

    B, S, H, Hkv, D = args.batch, args.seq, args.heads, args.kv_heads, args.head_dim
    shape = {"B": B, "H": H, "Hkv": Hkv, "S": S, "Skv": S, "D": D, "causal": 1}
    gemm_shape = {"M": B * S, "N": H * D, "K": H * D, "layout": "nt"}
    stage("pin_defaults")
    tilepilot.pin_defaults("attention", [shape])
    try:
        tilepilot.pin_defaults("gemm", [gemm_shape])
    except (ValueError, RuntimeError) as e:  # the gemm op then falls back: no gemm rows
        print(f"profile_torch_op: pin_defaults(gemm, {gemm_shape}): {e}", file=sys.stderr)
    dev = torch.device("cuda", _core.selected_device())
    g = torch.Generator(device=dev).manual_seed(0)

    def proj(heads):  # [B, S, heads * D] viewed as [B, heads, S, D], as transformers does
        x = torch.randn(B, S, heads * D, device=dev, dtype=torch.bfloat16, generator=g)
        return x.view(B, S, heads, D).transpose(1, 2)

    q, k, v = proj(H), proj(Hkv), proj(Hkv)
    qc, kc, vc = q.contiguous(), k.contiguous(), v.contiguous()
    out = torch.empty_like(qc)
    x = torch.randn(B * S, H * D, device=dev, dtype=torch.bfloat16, generator=g)
    w = torch.randn(H * D, H * D, device=dev, dtype=torch.bfloat16, generator=g)
    gemm_out = torch.empty(B * S, H * D, device=dev, dtype=torch.bfloat16)
    stream = torch.cuda.current_stream(dev).cuda_stream
    op, gemm = torch.ops.tilepilot.attention, torch.ops.tilepilot.gemm

    cases = {
        "sdpa": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True),
        "op": lambda: op(q, k, v, True),
        "op_contig": lambda: op(qc, kc, vc, True),
        "device": lambda: _device.attention(qc, kc, vc, True, None, None, None, None),
        "core": lambda: _core.run_cuda("attention", [qc, kc, vc, out], {"causal": "1"}, stream),
        "contiguous": lambda: (q.contiguous(), k.contiguous(), v.contiguous()),
        "stream_torch": lambda: torch.cuda.current_stream(dev).cuda_stream,
        "stream_raw": lambda: _device.torch_stream(dev.index),
    }
    gemm_cases = {
        "matmul": lambda: x @ w.t(),
        "gemm_op": lambda: gemm(x, w, "nt"),
        "gemm_device": lambda: _device.gemm(x, w, "nt", None, None, None),
        "gemm_core": lambda: _core.run_cuda("gemm", [x, w, gemm_out], {"layout": "nt"}, stream),
    }
    # The op must take the kernel here, or the rows time the fallback.
    stage("first op call")
    tilepilot.torch_ops.reset_stats()
    op(q, k, v, True)
    st = tilepilot.torch_ops.stats().get("attention", {})
    if st.get("tilepilot") != 1:
        print(f"profile_torch_op: the op fell back ({st}); the pins missed {shape}",
              file=sys.stderr)
        return 1
    stage("first gemm op call")
    gemm(x, w, "nt")
    st = tilepilot.torch_ops.stats().get("gemm", {})
    if st.get("tilepilot") == 1:
        cases.update(gemm_cases)
    else:
        print(f"profile_torch_op: the gemm op fell back ({st}); no gemm rows", file=sys.stderr)

    n = args.calls
    rows = []
    for name, fn in cases.items():
        stage(name)
        for _ in range(10):
            fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        host = (time.perf_counter() - t0) / n
        torch.cuda.synchronize()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(n):
            fn()
        e1.record()
        torch.cuda.synchronize()
        gpu = e0.elapsed_time(e1) / n * 1e-3
        rows.append({"case": name, "host_us": host * 1e6, "gpu_us": gpu * 1e6})
        print(f"{name:<12} host {host * 1e6:9.1f} us/call   gpu (events) {gpu * 1e6:9.1f} us/call")

    prof = cProfile.Profile()
    prof.enable()
    for _ in range(n):
        op(q, k, v, True)
    prof.disable()
    torch.cuda.synchronize()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(25)
    print(f"\ncProfile of {n} op calls, by own time:")
    print(text.getvalue())
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"shape": shape, "gemm_shape": gemm_shape, "calls": n, "rows": rows,
                       "device": torch.cuda.get_device_name(dev)}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
