"""attention on the CPU interpreter against NumPy fp64, on small odd shapes."""
import numpy as np
import pytest
import tilepilot
from conftest import assert_close, attention_ref, round_to


def qkv(rng, B, H, Hkv, S, Skv, D):
    q = rng.uniform(-1, 1, (B, H, S, D)).astype(np.float32)
    k = rng.uniform(-1, 1, (B, Hkv, Skv, D)).astype(np.float32)
    v = rng.uniform(-1, 1, (B, Hkv, Skv, D)).astype(np.float32)
    return q, k, v


CASES = [  # B, H, Hkv, S, Skv, D
    (1, 1, 1, 1, 1, 64),
    (2, 3, 3, 13, 13, 64),
    (1, 4, 2, 9, 21, 32),    # grouped heads, more keys than queries
    (2, 2, 1, 19, 7, 16),    # more queries than keys
]


@pytest.mark.parametrize("B,H,Hkv,S,Skv,D", CASES)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_attention_matches_fp64(rng, B, H, Hkv, S, Skv, D, causal, dtype):
    q, k, v = qkv(rng, B, H, Hkv, S, Skv, D)
    o = tilepilot.attention(q, k, v, causal=causal, dtype=dtype)
    assert o.shape == q.shape and o.dtype == np.float32
    want, _ = attention_ref(*(round_to(t, dtype) for t in (q, k, v)), causal=causal)
    assert_close(o, want, dtype, f"attention {dtype} causal={causal} {q.shape} {k.shape}")
    np.testing.assert_array_equal(o, round_to(o, dtype))


def test_attention_scale_and_lse(rng):
    q, k, v = qkv(rng, 1, 2, 2, 11, 17, 32)
    o, lse = tilepilot.attention(q, k, v, scale=0.3, return_lse=True)
    want, want_lse = attention_ref(*(round_to(t, "bf16") for t in (q, k, v)), scale=0.3)
    assert_close(o, want, "bf16", "attention scale=0.3")
    assert lse.shape == (1, 2, 11)
    assert_close(lse, want_lse, "bf16", "log-sum-exp")


def test_attention_padded_batch_lens(rng):
    q, k, v = qkv(rng, 3, 2, 2, 6, 10, 16)
    lens = [10, 4, 0]  # a batch entry with no keys gives zeros
    o = tilepilot.attention(q, k, v, causal=True, lens=lens)
    want, _ = attention_ref(*(round_to(t, "bf16") for t in (q, k, v)), causal=True, lens=lens)
    assert_close(o, want, "bf16", "attention lens")
    assert not o[2].any()
