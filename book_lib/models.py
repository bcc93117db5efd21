"""Published Transformer configs: released checkpoints and the made-up models of the book's problems.

A data table, as `hardware` is for chips: each preset is a `TransformerConfig` whose `source` says
where its numbers come from (the Hugging Face config.json of a released checkpoint, or the part and
question of the book that defines it). `get_model` finds one by name, ignoring case, spaces, dashes,
underscores and dots, and passes a `TransformerConfig` through, so every public function of the cost
models takes either. The counting itself (parameters, FLOPs, KV cache, memory) is `transformer`'s.
Pure data: no JAX here.

Book: Part 4 (Transformers), Question 1; Part 6 (Training LLaMA 3 on TPUs); Part 7 (Inference), Questions 1-4.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from book_lib import checks
from book_lib.transformer import TransformerConfig

__all__ = ["MODELS", "get_model", "model_names"]

_HF = "https://huggingface.co/{}/blob/main/config.json"
_BOOK = "How to Scale Your Model, {}"


def _llama(name: str, repo: str, L: int, D: int, F: int, N: int, K: int, V: int, **kw: Any) -> TransformerConfig:
    """A released checkpoint with 128-wide heads (all the presets here): n_layers L, d_model D, ..."""
    return TransformerConfig(
        n_layers=L, d_model=D, d_ff=F, n_heads=N, n_kv_heads=K, head_dim=128, vocab_size=V, name=name,
        source=_HF.format(repo), **kw,
    )  # fmt: skip


_ALL = (
    _llama("llama-2-7b", "meta-llama/Llama-2-7b-hf", 32, 4096, 11008, 32, 32, 32000, max_positions=4096),
    _llama("llama-2-13b", "meta-llama/Llama-2-13b-hf", 40, 5120, 13824, 40, 40, 32000, max_positions=4096),
    _llama("llama-2-70b", "meta-llama/Llama-2-70b-hf", 80, 8192, 28672, 64, 8, 32000, max_positions=4096),
    _llama("llama-3-8b", "meta-llama/Meta-Llama-3-8B", 32, 4096, 14336, 32, 8, 128256, max_positions=8192),
    _llama("llama-3-70b", "meta-llama/Meta-Llama-3-70B", 80, 8192, 28672, 64, 8, 128256, max_positions=8192),
    _llama("llama-3.1-405b", "meta-llama/Llama-3.1-405B", 126, 16384, 53248, 128, 8, 128256, max_positions=131072),
    _llama("mistral-7b", "mistralai/Mistral-7B-v0.1", 32, 4096, 14336, 32, 8, 32000, max_positions=32768),
    _llama(
        "mixtral-8x7b",
        "mistralai/Mixtral-8x7B-v0.1",
        32,
        4096,
        14336,
        32,
        8,
        32000,
        n_experts=8,
        experts_per_token=2,
        max_positions=32768,
    ),  # fmt: skip
    _llama(
        "gemma-2-27b",
        "google/gemma-2-27b",
        46,
        4608,
        36864,
        32,
        16,
        256000,
        tied_embeddings=True,
        norms_per_layer=4,
        max_positions=8192,
    ),  # fmt: skip
    _llama("qwen2.5-72b", "Qwen/Qwen2.5-72B", 80, 8192, 29568, 64, 8, 152064, qkv_bias=True),
    # 256 routed experts of width 2048 and one shared, top-8; dense MLP (18432) in the first 3 of 61 layers;
    # latent attention (q rank 1536, kv rank 512, RoPE 64, value heads 128). The checkpoint's 685B also
    # hold one multi-token-prediction layer, which the report's 671B leave out, and so does this preset.
    _llama(
        "deepseek-v3",
        "deepseek-ai/DeepSeek-V3",
        61,
        7168,
        18432,
        128,
        128,
        129280,
        n_experts=256,
        experts_per_token=8,
        moe_d_ff=2048,
        n_shared_experts=1,
        first_dense_layers=3,
        kv_lora_rank=512,
        q_lora_rank=1536,
        rope_head_dim=64,
        v_head_dim=128,
        max_positions=163840,
    ),  # fmt: skip
    # 128 experts of width 1536, top-8, in every layer; q and k norms.
    _llama(
        "qwen3-235b-a22b",
        "Qwen/Qwen3-235B-A22B",
        94,
        4096,
        12288,
        64,
        4,
        151936,
        n_experts=128,
        experts_per_token=8,
        moe_d_ff=1536,
        qk_norm=True,
        max_positions=40960,
    ),  # fmt: skip
    # Worked problems of the book. Part 4 Q1: D = 4096, F = 4D, V = 32,000, L = 64, MHA with N H = D
    # (we pick N = 32, H = 128); untied, one D-wide norm per layer as in the book's "Other: D" row.
    TransformerConfig(
        n_layers=64,
        d_model=4096,
        d_ff=16384,
        n_heads=32,
        n_kv_heads=32,
        head_dim=128,
        vocab_size=32000,
        norms_per_layer=1,
        name="book-ch4-q1",
        source=_BOOK.format("Part 4, Q1"),
    ),  # fmt: skip
    # Part 7 problems: a LLaMA-2-13B-like model with GQA, H = 256 (so N H = 2D) and shared embeddings.
    TransformerConfig(
        n_layers=64,
        d_model=4096,
        d_ff=16384,
        n_heads=32,
        n_kv_heads=8,
        head_dim=256,
        vocab_size=32128,
        tied_embeddings=True,
        name="book-ch7",
        source=_BOOK.format("Part 7, Q1-Q4"),
    ),  # fmt: skip
)

MODELS: MappingProxyType[str, TransformerConfig] = MappingProxyType({model.name: model for model in _ALL})
# Other spellings of a preset (the book writes "LLaMA 3-405B" for the 3.1 checkpoint).
_ALIASES = {"llama-3-405b": "llama-3.1-405b", "mistral-7b-v0.1": "mistral-7b", "book-ch7-q1": "book-ch7"}


def _key(name: str) -> str:
    """`name` lowercased without spaces, dashes, underscores and dots (the lookup key)."""
    return "".join(ch for ch in name.lower() if ch not in " -_.")


_BY_NAME = {**MODELS, **{alias: MODELS[target] for alias, target in _ALIASES.items()}}


def model_names() -> tuple[str, ...]:
    """Canonical preset names, in table order."""
    return tuple(MODELS)


def get_model(model: str | TransformerConfig, *, arg: str = "model") -> TransformerConfig:
    """The preset called `model`; case, spaces, dashes, underscores and dots are ignored.

    `get_model("LLaMA 3 70B") == get_model("llama_3_70b")`. A `TransformerConfig` is returned as is.

    Args:
        model: a preset name (or one of its aliases), or a `TransformerConfig`.
        arg: the argument name an error message gives (a caller's own).

    Raises:
        ValueError: unknown name; the message lists the closest known names.
    """
    if isinstance(model, TransformerConfig):
        return model
    return checks.lookup(arg, model, _BY_NAME, what="model", key=_key)
