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

import json
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from book_lib import checks
from book_lib.transformer import TransformerConfig

__all__ = ["MODELS", "HF_FAMILIES", "get_model", "model_names", "from_hf_config"]

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
    _checkpoint("llama-3.1-8b", "meta-llama/Llama-3.1-8B", max_positions=131072,
                n_layers=32, d_model=4096, d_ff=14336, n_heads=32, n_kv_heads=8, vocab_size=128256),
    _checkpoint("llama-3.1-70b", "meta-llama/Llama-3.1-70B", max_positions=131072,
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
    # GPT-3 175B, never released: Brown et al. 2020, Table 2.1 (96 layers, d_model 12288, 96 heads of 128,
    # a 2048-token context) and section 2.1 (GPT-2's architecture: a 4 D plain GELU MLP, the input
    # embedding reused for the output, the GPT-2 BPE vocabulary of 50257).
    TransformerConfig(name="gpt-3-175b", source="https://arxiv.org/abs/2005.14165 (Table 2.1)",
                      n_layers=96, d_model=12288, d_ff=49152, n_heads=96, n_kv_heads=96, head_dim=128,
                      vocab_size=50257, gated_mlp=False, tied_embeddings=True, max_positions=2048),
    # Worked problems of the book. Part 4 Q1: D = 4096, F = 4D, V = 32,000, L = 64, MHA with N H = D
    # (we pick N = 32, H = 128); untied, one D-wide norm per layer as in the book's "Other: D" row.
    TransformerConfig(name="book-ch4-q1", source=_BOOK.format("Part 4, Q1"), norms_per_layer=1,
                      n_layers=64, d_model=4096, d_ff=16384, n_heads=32, n_kv_heads=32, head_dim=128, vocab_size=32000),
    # Part 7 problems: a LLaMA-2-13B-like model with GQA, H = 256 (so N H = 2D) and shared embeddings.
    TransformerConfig(name="book-ch7", source=_BOOK.format("Part 7, Q1-Q4"), tied_embeddings=True,
                      n_layers=64, d_model=4096, d_ff=16384, n_heads=32, n_kv_heads=8, head_dim=256, vocab_size=32128),
)  # fmt: skip

MODELS: MappingProxyType[str, TransformerConfig] = MappingProxyType({model.name: model for model in _ALL})
# The book's own problems answer to their names but are not offered as models to plan or serve.
_INTERNAL = tuple(name for name in MODELS if name.startswith("book-"))
# Other spellings of a preset (the book writes "LLaMA 3-405B" for the 3.1 checkpoint).
_ALIASES = {"llama-3-405b": "llama-3.1-405b", "mistral-7b-v0.1": "mistral-7b", "book-ch7-q1": "book-ch7"}


def _key(name: str) -> str:
    """`name` lowercased without spaces, dashes, underscores and dots (the lookup key)."""
    return "".join(ch for ch in name.lower() if ch not in " -_.")


_BY_NAME = {**MODELS, **{alias: MODELS[target] for alias, target in _ALIASES.items()}}


def model_names(*, internal: bool = False) -> tuple[str, ...]:
    """Canonical preset names, in table order: the released and published models, and with
    `internal=True` the book's problems too (`book-ch4-q1`, `book-ch7`)."""
    return tuple(name for name in MODELS if internal or name not in _INTERNAL)


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
    return checks.lookup(arg, model, _BY_NAME, what="model", key=_key, offered=model_names())


# config.json's model_type -> the families `from_hf_config` reads (their config.json fields differ).
HF_FAMILIES = ("llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3")


def _read_config(config: Mapping[str, Any] | str | Path, name: str) -> tuple[Mapping[str, Any], str, str]:
    """(the config's dict, its name, its source path) from a dict or a config.json's path."""
    if isinstance(config, Mapping):
        return config, name or str(config.get("_name_or_path", "")), ""
    path = Path(config)
    try:
        read = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"config={str(path)!r}: not a readable config.json ({error}); allowed: a JSON file") from None
    if not isinstance(read, Mapping):
        raise ValueError(f"config={str(path)!r}: not a JSON object; allowed: a config.json")
    return read, name or (path.parent.name if path.name == "config.json" else path.stem), str(path)


def _family_fields(family: str, field: Any, config: Mapping[str, Any]) -> dict[str, Any]:
    """The fields one family adds to the common ones (`from_hf_config`'s table)."""
    if family == "mixtral":
        return {"n_experts": field("num_local_experts"), "experts_per_token": field("num_experts_per_tok")}
    if family in ("qwen2", "qwen3"):
        return {"qkv_bias": True} if family == "qwen2" else {"qk_norm": True}
    if family in ("qwen2_moe", "qwen3_moe"):
        expert, shared = field("moe_intermediate_size"), config.get("shared_expert_intermediate_size") or 0
        return {
            "qkv_bias": family == "qwen2_moe", "qk_norm": family == "qwen3_moe", "n_experts": field("num_experts"),
            "experts_per_token": field("num_experts_per_tok"), "moe_d_ff": expert,
            "n_shared_experts": round(shared / expert),
        }  # fmt: skip
    if family.startswith("deepseek"):
        return {
            "n_experts": field("n_routed_experts"), "experts_per_token": field("num_experts_per_tok"),
            "moe_d_ff": field("moe_intermediate_size"), "n_shared_experts": config.get("n_shared_experts") or 0,
            "first_dense_layers": config.get("first_k_dense_replace") or 0, "kv_lora_rank": field("kv_lora_rank"),
            "q_lora_rank": config.get("q_lora_rank"), "head_dim": field("qk_nope_head_dim"),
            "rope_head_dim": field("qk_rope_head_dim"), "v_head_dim": field("v_head_dim"),
        }  # fmt: skip
    return {}


def from_hf_config(config: Mapping[str, Any] | str | Path, *, name: str = "") -> TransformerConfig:
    """The `TransformerConfig` of a Hugging Face `config.json` (a path or its parsed dict).

        L = num_hidden_layers, D = hidden_size, F = intermediate_size,
        N = num_attention_heads, K = num_key_value_heads (N when absent),
        H = head_dim (D / N when absent), V = vocab_size,
        tied = tie_word_embeddings, max_positions = max_position_embeddings;
        Mixtral: E = num_local_experts, k = num_experts_per_tok;
        Qwen2: biased q, k, v; Qwen3: q and k norms; their MoE: E = num_experts,
          expert width moe_intermediate_size, shared experts
          shared_expert_intermediate_size / that width;
        DeepSeek: E = n_routed_experts, n_shared_experts,
          first_k_dense_replace dense layers, latent attention (kv_lora_rank,
          q_lora_rank, H = qk_nope_head_dim, qk_rope_head_dim, v_head_dim).

    `name` (default: the file's folder, or config's `_name_or_path`) names it; `source` is the path.

    Raises:
        ValueError: a file that is not JSON, a model_type outside `HF_FAMILIES`, or a missing field.
    """
    config, name, source = _read_config(config, name)
    family = checks.one_of("model_type", config.get("model_type", ""), HF_FAMILIES)

    def field(key: str) -> Any:
        value = config.get(key)
        if value is None:
            raise ValueError(f"config[{key!r}]: missing from a {family} config.json; allowed: a count")
        return value

    n_heads = field("num_attention_heads")
    shape: dict[str, Any] = {
        "n_layers": field("num_hidden_layers"),
        "d_model": field("hidden_size"),
        "d_ff": field("intermediate_size"),
        "n_heads": n_heads,
        "n_kv_heads": config.get("num_key_value_heads") or n_heads,
        "head_dim": config.get("head_dim") or field("hidden_size") // n_heads,
        "vocab_size": field("vocab_size"),
        "tied_embeddings": bool(config.get("tie_word_embeddings", False)),
        "max_positions": config.get("max_position_embeddings"),
    }
    shape |= _family_fields(family, field, config)
    return TransformerConfig(name=name, source=source, **shape)
