"""TilePilot attention inside Hugging Face transformers models.

    import tilepilot.hf
    tilepilot.hf.register()                      # attn_implementation="tilepilot"
    model = LlamaForCausalLM(config)              # config._attn_implementation = "tilepilot"

The function below has the signature of transformers' attention interface and calls
torch.ops.tilepilot.attention, which runs TilePilot's released kernel inside the released
envelope and SDPA outside it. Masks are built as for "sdpa": none when causal-without-padding
can be expressed by the flag (the TilePilot path), an explicit mask otherwise (SDPA, logged once).
"""
from __future__ import annotations

import logging

import torch

from . import torch_ops

log = logging.getLogger("tilepilot")
_mask_logged = False


def tilepilot_attention(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor,
                        value: torch.Tensor, attention_mask, scaling=None, dropout: float = 0.0,
                        is_causal=None, **kwargs):
    """query [B, H, S, D], key/value [B, Hkv, Skv, D] -> ([B, S, H, D], None), as SDPA's."""
    global _mask_logged
    is_causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    # As transformers' sdpa path: one query token attends to everything before it.
    is_causal = bool(query.shape[2] > 1 and attention_mask is None and is_causal)
    if attention_mask is not None or (dropout and module.training):
        if not _mask_logged:
            _mask_logged = True
            log.warning("attention with an explicit mask or dropout runs "
                        "F.scaled_dot_product_attention (TilePilot takes causal/no mask, no "
                        "dropout) [logged once]")
        from transformers.integrations.sdpa_attention import sdpa_attention_forward
        return sdpa_attention_forward(module, query, key, value, attention_mask,
                                      dropout=dropout, scaling=scaling, is_causal=is_causal,
                                      **kwargs)
    out = torch.ops.tilepilot.attention(query, key, value, is_causal, scaling)
    # out has query's layout: [B, S, H, D] memory for transformers' per-head views, where this
    # .contiguous() copies nothing.
    return out.transpose(1, 2).contiguous(), None


def register(name: str = "tilepilot") -> str:
    """Registers the attention function (and SDPA's mask format) under `name`; returns it."""
    try:
        from transformers import AttentionInterface
    except ImportError as e:
        raise RuntimeError("tilepilot.hf needs transformers with AttentionInterface "
                           f"(>= 4.48): {e}; pip install -U transformers") from None
    AttentionInterface.register(name, tilepilot_attention)
    try:  # transformers >= 4.53 builds masks per implementation; use SDPA's format
        from transformers import AttentionMaskInterface
        from transformers.masking_utils import sdpa_mask
        AttentionMaskInterface.register(name, sdpa_mask)
    except ImportError:
        pass
    return name


__all__ = ["register", "tilepilot_attention", "torch_ops"]
