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


def _checkpoint(name: str, repo: str, **shape: Any) -> TransformerConfig:
    """A released checkpoint from its Hugging Face `repo`; every preset here has 128-wide heads."""
    return TransformerConfig(name=name, source=_HF.format(repo), head_dim=128, **shape)


_ALL = (
    _checkpoint("llama-2-7b", "meta-llama/Llama-2-7b-hf", max_positions=4096,
                n_layers=32, d_model=4096, d_ff=11008, n_heads=32, n_kv_heads=32, vocab_size=32000),
    _checkpoint("llama-2-13b", "meta-llama/Llama-2-13b-hf", max_positions=4096,
                n_layers=40, d_model=5120, d_ff=13824, n_heads=40, n_kv_heads=40, vocab_size=32000),
    _checkpoint("llama-2-70b", "meta-llama/Llama-2-70b-hf", max_positions=4096,
                n_layers=80, d_model=8192, d_ff=28672, n_heads=64, n_kv_heads=8, vocab_size=32000),
    _checkpoint("llama-3-8b", "meta-llama/Meta-Llama-3-8B", max_positions=8192,
                n_layers=32, d_model=4096, d_ff=14336, n_heads=32, n_kv_heads=8, vocab_size=128256),
    _checkpoint("llama-3-70b", "meta-llama/Meta-Llama-3-70B", max_positions=8192,
                n_layers=80, d_model=8192, d_ff=28672, n_heads=64, n_kv_heads=8, vocab_size=128256),
    _checkpoint("llama-3.1-405b", "meta-llama/Llama-3.1-405B", max_positions=131072,
                n_layers=126, d_model=16384, d_ff=53248, n_heads=128, n_kv_heads=8, vocab_size=128256),
    _checkpoint("mistral-7b", "mistralai/Mistral-7B-v0.1", max_positions=32768,
                n_layers=32, d_model=4096, d_ff=14336, n_heads=32, n_kv_heads=8, vocab_size=32000),
    _checkpoint("mixtral-8x7b", "mistralai/Mixtral-8x7B-v0.1", max_positions=32768,
                n_layers=32, d_model=4096, d_ff=14336, n_heads=32, n_kv_heads=8, vocab_size=32000,
                n_experts=8, experts_per_token=2),
    _checkpoint("gemma-2-27b", "google/gemma-2-27b", max_positions=8192,
                n_layers=46, d_model=4608, d_ff=36864, n_heads=32, n_kv_heads=16, vocab_size=256000,
                tied_embeddings=True, norms_per_layer=4),
    _checkpoint("qwen2.5-72b", "Qwen/Qwen2.5-72B",
                n_layers=80, d_model=8192, d_ff=29568, n_heads=64, n_kv_heads=8, vocab_size=152064, qkv_bias=True),
    # 256 routed experts of width 2048 and one shared, top-8; dense MLP (18432) in the first 3 of 61 layers;
    # latent attention (q rank 1536, kv rank 512, RoPE 64, value heads 128). The checkpoint's 685B also
    # hold one multi-token-prediction layer, which the report's 671B leave out, and so does this preset.
    _checkpoint("deepseek-v3", "deepseek-ai/DeepSeek-V3", max_positions=163840,
                n_layers=61, d_model=7168, d_ff=18432, n_heads=128, n_kv_heads=128, vocab_size=129280,
                n_experts=256, experts_per_token=8, moe_d_ff=2048, n_shared_experts=1, first_dense_layers=3,
                kv_lora_rank=512, q_lora_rank=1536, rope_head_dim=64, v_head_dim=128),
    # 128 experts of width 1536, top-8, in every layer; q and k norms.
    _checkpoint("qwen3-235b-a22b", "Qwen/Qwen3-235B-A22B", max_positions=40960,
                n_layers=94, d_model=4096, d_ff=12288, n_heads=64, n_kv_heads=4, vocab_size=151936,
                n_experts=128, experts_per_token=8, moe_d_ff=1536, qk_norm=True),
    # Worked problems of the book. Part 4 Q1: D = 4096, F = 4D, V = 32,000, L = 64, MHA with N H = D
    # (we pick N = 32, H = 128); untied, one D-wide norm per layer as in the book's "Other: D" row.
    TransformerConfig(name="book-ch4-q1", source=_BOOK.format("Part 4, Q1"), norms_per_layer=1,
                      n_layers=64, d_model=4096, d_ff=16384, n_heads=32, n_kv_heads=32, head_dim=128, vocab_size=32000),
    # Part 7 problems: a LLaMA-2-13B-like model with GQA, H = 256 (so N H = 2D) and shared embeddings.
    TransformerConfig(name="book-ch7", source=_BOOK.format("Part 7, Q1-Q4"), tied_embeddings=True,
                      n_layers=64, d_model=4096, d_ff=16384, n_heads=32, n_kv_heads=8, head_dim=256, vocab_size=32128),
)  # fmt: skip

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
