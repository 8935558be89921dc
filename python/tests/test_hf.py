"""attn_implementation="tilepilot" in a tiny random-weight Llama, on the CPU.

Skipped without torch or transformers. On CPU tensors every attention call takes the SDPA
fallback, so this checks the adapter's plumbing (registration, masks, layouts) and that the
model's outputs equal the "sdpa" implementation's.
"""
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
import tilepilot.hf  # noqa: E402
import tilepilot.torch_ops as tops  # noqa: E402


def tiny_llama():
    config = transformers.LlamaConfig(vocab_size=64, hidden_size=64, intermediate_size=96,
                                      num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, max_position_embeddings=64)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).eval()


def logits(model, impl, ids, mask=None):
    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation(impl)
    else:
        model.config._attn_implementation = impl
    with torch.inference_mode():
        return model(input_ids=ids, attention_mask=mask, use_cache=False).logits


def test_tilepilot_attention_matches_sdpa():
    assert tilepilot.hf.register() == "tilepilot"
    model = tiny_llama()
    ids = torch.randint(0, 64, (2, 11))
    tops.reset_stats()
    got = logits(model, "tilepilot", ids)
    assert tops.stats()["attention"]["fallback"] == {"not_cuda": 2}  # one call per layer
    torch.testing.assert_close(got, logits(model, "sdpa", ids))


def test_padding_mask_takes_sdpa():
    tilepilot.hf.register()
    model = tiny_llama()
    ids = torch.randint(0, 64, (2, 9))
    mask = torch.ones(2, 9, dtype=torch.long)
    mask[1, :3] = 0  # left padding: an explicit mask, which TilePilot's kernel does not take
    torch.testing.assert_close(logits(model, "tilepilot", ids, mask),
                               logits(model, "sdpa", ids, mask))


def test_llama_script_pins_the_problems_the_model_asks_about(monkeypatch):
    """llama_transformers.py --pin-defaults pins attention_problems(); they must be exactly the
    problems torch.ops.tilepilot.attention asks the dispatcher about in the prefill. On the CPU
    the device check is bypassed and the questions recorded (each call then takes SDPA)."""
    import importlib.util
    import pathlib
    path = pathlib.Path(__file__).resolve().parents[1] / "scripts" / "llama_transformers.py"
    spec = importlib.util.spec_from_file_location("llama_transformers", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)

    asked = []

    def record(key, op, shape, dtype):
        asked.append((op, dict(shape), dtype))
        return "recorded: test"

    # A fresh verdict cache: verdicts of earlier calls would skip the patched checks, and the
    # patched ones must not outlive the test.
    monkeypatch.setattr(tops, "_verdicts", {})
    monkeypatch.setattr(tops, "_device_reason", lambda tensors, dtypes: None)
    monkeypatch.setattr(tops, "_decide", record)
    tilepilot.hf.register()
    model = tiny_llama().to(torch.bfloat16)
    ids = torch.randint(0, 64, (3, 13))
    tops.reset_stats()
    logits(model, "tilepilot", ids)
    want = script.attention_problems(model.config, batch=3, seq=13)
    # Every layer calls the op; each distinct problem is asked about once (the verdict cache).
    assert tops.stats()["attention"]["fallback"] == {"recorded": model.config.num_hidden_layers}
    problems = [str(sorted(s.items())) for _, s, _ in asked]
    assert len(problems) == len(set(problems))
    assert set(problems) == {str(sorted(s.items())) for s in want}
    assert all(op == "attention" and dt == "bf16" for op, _, dt in asked)
    # The script's problems are ones pin_defaults takes (the CPU identity here; the GPU in the
    # script).
    tilepilot.configure(releases=[])
    try:
        assert len(tilepilot.pin_defaults("attention", want, "bf16", device=False)["pins"]) == 1
    finally:
        tilepilot.configure(releases=[])
