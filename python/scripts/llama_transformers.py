#!/usr/bin/env python3
"""End-to-end effect of TilePilot attention in a Hugging Face Llama prefill (GPU only).

Builds a small Llama from a LlamaConfig with random weights (nothing is downloaded), runs the
prefill with attn_implementation="tilepilot" and "sdpa", checks that the logits agree, and
reports the latency change from interleaved runs timed with CUDA events. TilePilot's kernel runs
only for problems its release pins (TILEPILOT_RELEASE or --release); the report says how many
attention calls took it, so a run where everything fell back to SDPA cannot pass for a result.

  python python/scripts/llama_transformers.py --seq 2048 --batch 2 --release out/release
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys


def fail(msg: str) -> None:
    print(f"llama_transformers: {msg}", file=sys.stderr)
    sys.exit(2)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--intermediate", type=int, default=5632)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--dtype", choices=["bf16", "f16"], default="bf16")
    ap.add_argument("--iters", type=int, default=20, help="timed runs per implementation")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--release", action="append", default=None,
                    help="release folder(s) for the dispatcher (default: $TILEPILOT_RELEASE)")
    ap.add_argument("--rtol", type=float, default=2e-2, help="relative L2 error allowed on logits")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    return ap.parse_args()


def imports():
    try:
        import torch
    except ImportError:
        fail("needs PyTorch with CUDA (pip install torch); torch is not installed")
    if not torch.cuda.is_available():
        fail("needs a CUDA GPU, and torch.cuda.is_available() is False on this machine "
             "(the CPU path is tested by python/tests; this script measures the GPU path)")
    try:
        import transformers  # noqa: F401
    except ImportError:
        fail("needs transformers (pip install transformers)")
    import tilepilot
    if tilepilot.torch_ops_error:
        fail(f"tilepilot.torch_ops did not load: {tilepilot.torch_ops_error}")
    import tilepilot.hf
    return torch, tilepilot


def set_impl(model, impl: str) -> None:
    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation(impl)
    else:  # older transformers read the config at every forward
        model.config._attn_implementation = impl


def main() -> None:
    args = parse_args()
    torch, tilepilot = imports()
    from transformers import LlamaConfig, LlamaForCausalLM
    if args.release:
        tilepilot.configure(releases=args.release)
    tilepilot.hf.register()
    dtype = {"bf16": torch.bfloat16, "f16": torch.float16}[args.dtype]
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=args.vocab, hidden_size=args.hidden,
                         intermediate_size=args.intermediate, num_hidden_layers=args.layers,
                         num_attention_heads=args.heads, num_key_value_heads=args.kv_heads,
                         max_position_embeddings=max(args.seq, 2048), attn_implementation="sdpa")
    model = LlamaForCausalLM(config).to(device="cuda", dtype=dtype).eval()
    ids = torch.randint(0, args.vocab, (args.batch, args.seq), device="cuda")

    def prefill(impl):
        set_impl(model, impl)
        with torch.inference_mode():
            return model(input_ids=ids, use_cache=False).logits

    ref = prefill("sdpa").float()
    tilepilot.torch_ops.reset_stats()
    got = prefill("tilepilot").float()
    calls = tilepilot.torch_ops.stats().get("attention", {"tilepilot": 0, "fallback": {}})
    rel = ((got - ref).norm() / ref.norm()).item()
    agree = (got.argmax(-1) == ref.argmax(-1)).float().mean().item()

    times = {"sdpa": [], "tilepilot": []}
    for i in range(args.warmup + args.iters):
        order = ("sdpa", "tilepilot") if i % 2 == 0 else ("tilepilot", "sdpa")
        for impl in order:  # interleaved, alternating order: drift hits both alike
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            set_impl(model, impl)
            torch.cuda.synchronize()
            start.record()
            with torch.inference_mode():
                model(input_ids=ids, use_cache=False)
            end.record()
            torch.cuda.synchronize()
            if i >= args.warmup:
                times[impl].append(start.elapsed_time(end))
    med = {k: statistics.median(v) for k, v in times.items()}
    result = {
        "model": f"llama L={args.layers} hidden={args.hidden} H={args.heads} Hkv={args.kv_heads}",
        "batch": args.batch, "seq": args.seq, "dtype": args.dtype,
        "logits_rel_l2": rel, "argmax_agreement": agree, "passed": rel <= args.rtol,
        "sdpa_ms_median": med["sdpa"], "tilepilot_ms_median": med["tilepilot"],
        "change_pct": 100.0 * (med["tilepilot"] - med["sdpa"]) / med["sdpa"],
        "attention_calls": calls, "device": torch.cuda.get_device_name(),
        "dispatch": tilepilot.dispatch_summary().strip(),
    }
    if args.json:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            print(f"{k}: {v}")
        if calls["tilepilot"] == 0:
            print("note: every attention call fell back to SDPA (see attention_calls); the "
                  "latency change measures the adapter, not TilePilot's kernel")
    sys.exit(0 if result["passed"] else 1)


if __name__ == "__main__":
    main()
