#!/usr/bin/env python3
"""End-to-end effect of TilePilot attention in a Hugging Face Llama prefill (GPU only).

Builds a small Llama from a LlamaConfig with random weights (nothing is downloaded), runs the
prefill with attn_implementation="tilepilot" and "sdpa", checks that the logits agree, and
reports the latency change from interleaved runs timed with CUDA events. TilePilot's kernel runs
only for problems its release pins (TILEPILOT_RELEASE or --release), or with --pin-defaults for
the model's attention problems pinned to the operator's default config on this GPU (no release
folder; the report says the pins are defaults, not a pilot's decision). The report says how many
attention calls took the kernel, so a run where everything fell back to SDPA cannot pass for a
result (with --pin-defaults such a run fails).

  python python/scripts/llama_transformers.py --seq 2048 --batch 2 --release out/release
  python python/scripts/llama_transformers.py --seq 1024 --batch 1 --pin-defaults --json

Only attention is routed to TilePilot (tilepilot.hf replaces the attention implementation; the
linear layers stay torch's), so only attention problems are pinned.
"""
from __future__ import annotations

import argparse
import json
import os
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
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--release", action="append", default=None,
                     help="release folder(s) for the dispatcher (default: $TILEPILOT_RELEASE)")
    src.add_argument("--pin-defaults", action="store_true",
                     help="pin the model's attention problems to the operator's default config "
                          "on this GPU (tilepilot.pin_defaults; replaces an attention release "
                          "from $TILEPILOT_RELEASE) instead of using a pilot release")
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


def attention_problems(config, batch: int, seq: int) -> list[dict]:
    """The attention problems the prefill asks TilePilot's dispatcher about, keyed as
    torch.ops.tilepilot.attention builds them from the tensors tilepilot.hf passes: query
    [B, H, S, D], key/value [B, Hkv, Skv, D] (no KV cache: Skv = S), causal when S > 1 and no
    mask (the prefill of unpadded ids). One problem: every layer has the same shape."""
    H, Hkv = config.num_attention_heads, config.num_key_value_heads
    D = getattr(config, "head_dim", None) or config.hidden_size // H
    return [{"B": batch, "H": H, "Hkv": Hkv, "S": seq, "Skv": seq, "D": D,
             "causal": int(seq > 1)}]


def register_timed(torch, tilepilot) -> dict:
    """Registers "<impl>_timed" twins of "sdpa" and "tilepilot" that record CUDA events around
    each attention call (same masks as the originals), for one profiled forward: the attention
    share of the forward's time. Returns {impl: list of (start, end) event pairs}."""
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    events = {"sdpa": [], "tilepilot": []}
    inner = {"sdpa": sdpa_attention_forward, "tilepilot": tilepilot.hf.tilepilot_attention}

    def timed(impl):
        def fn(*a, **kw):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            out = inner[impl](*a, **kw)
            end.record()
            events[impl].append((start, end))
            return out
        return fn

    for impl in events:
        AttentionInterface.register(impl + "_timed", timed(impl))
        try:
            from transformers import AttentionMaskInterface
            from transformers.masking_utils import sdpa_mask
            AttentionMaskInterface.register(impl + "_timed", sdpa_mask)
        except ImportError:
            pass
    return events


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
    pins = None
    if args.pin_defaults:
        try:
            pins = tilepilot.pin_defaults("attention", attention_problems(config, args.batch,
                                                                          args.seq),
                                          dtype=args.dtype, device=True)
        except ValueError as e:
            fail(f"--pin-defaults: {e}")
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

    def timed_forward(impl) -> float:
        """One forward with attention implementation `impl`, in ms (CUDA events)."""
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        set_impl(model, impl)
        torch.cuda.synchronize()
        start.record()
        with torch.inference_mode():
            model(input_ids=ids, use_cache=False)
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end)

    times = {"sdpa": [], "tilepilot": []}
    for i in range(args.warmup + args.iters):
        order = ("sdpa", "tilepilot") if i % 2 == 0 else ("tilepilot", "sdpa")
        for impl in order:  # interleaved, alternating order: drift hits both alike
            ms = timed_forward(impl)
            if i >= args.warmup:
                times[impl].append(ms)
    med = {k: statistics.median(v) for k, v in times.items()}

    # One profiled forward per implementation: attention's share of the forward's time.
    events = register_timed(torch, tilepilot)
    share = {}
    for impl in ("sdpa", "tilepilot"):
        events[impl].clear()
        total_ms = timed_forward(impl + "_timed")
        attn_ms = sum(a.elapsed_time(b) for a, b in events[impl])
        share[impl] = {"attention_ms": attn_ms, "forward_ms": total_ms,
                       "share": attn_ms / total_ms if total_ms > 0 else 0.0,
                       "calls": len(events[impl])}
    result = {
        "model": f"llama L={args.layers} hidden={args.hidden} H={args.heads} Hkv={args.kv_heads}",
        "batch": args.batch, "seq": args.seq, "dtype": args.dtype,
        "logits_rel_l2": rel, "argmax_agreement": agree, "passed": rel <= args.rtol,
        "sdpa_ms_median": med["sdpa"], "tilepilot_ms_median": med["tilepilot"],
        "change_pct": 100.0 * (med["tilepilot"] - med["sdpa"]) / med["sdpa"],
        "attention_calls": calls, "device": torch.cuda.get_device_name(),
        "attention_share": share,
        "dispatch": tilepilot.dispatch_summary().strip(),
    }
    if pins is not None:
        result["kernel_source"] = "defaults"
        result["pins"] = dict(pins, note="the operator's default config pinned by --pin-defaults "
                                         "(tilepilot.pin_defaults), not a pilot release")
    else:
        result["kernel_source"] = "release"
        result["release"] = args.release or [d for d in os.environ.get(
            "TILEPILOT_RELEASE", "").split(":") if d]
    # With --pin-defaults every attention call of the prefill is pinned, so each must have taken
    # the kernel; a call that fell back means the pins missed the model's problem: the run fails.
    if pins is not None and (calls["tilepilot"] == 0 or calls["fallback"]):
        result["passed"] = False
        result["pins_missed"] = True
    if args.json:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            print(f"{k}: {v}")
    note = sys.stderr if args.json else sys.stdout
    if calls["tilepilot"] == 0:
        print("note: every attention call fell back to SDPA (see attention_calls); the "
              "latency change measures the adapter, not TilePilot's kernel", file=note)
    if result.get("pins_missed"):
        print("note: --pin-defaults pinned the attention problems, yet calls fell back (see "
              "attention_calls and dispatch): this run fails", file=note)
    sys.exit(0 if result["passed"] else 1)


if __name__ == "__main__":
    main()
