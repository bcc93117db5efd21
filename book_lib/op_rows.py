"""The rows of the book's accounting tables for a `transformer.TransformerConfig`: one `OpRow` per operation.

`rows(cfg, ...)` lists every operation of a model with its FLOPs and weights, in the groups of
`breakdowns.OP_GROUPS`: the MLP (dense layers, then the MoE layers' routed experts, shared experts and
router), the attention projections (grouped-query, or multi-head latent attention), the two attention
products and the free softmax, the norms, the embedding and the unembedding. `TransformerConfig`'s
`param_breakdown`, `flops_breakdown` and `op_rows` are sums over these rows. Pure math: no JAX here.

Book: Part 4 (Transformers), "Global FLOPs and Params Calculation" (its MLP, attention and
other-operations tables); "Sparsity and Mixture-of-Experts".
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, Any

from book_lib.breakdowns import OpRow

if TYPE_CHECKING:
    from book_lib.transformer import TransformerConfig

__all__ = ["rows", "qkvo_rows"]


def rows(cfg: TransformerConfig, c: float, seq_len: float, tokens: float, *, causal: bool) -> tuple[OpRow, ...]:
    """Every operation of `cfg` for `tokens` tokens attending to `seq_len` keys, c = 3 when training else 1
    (attention's c halved when causal): see `TransformerConfig.op_rows`."""
    out = _mlp_rows(cfg, c, tokens) + qkvo_rows(cfg, c, tokens)
    out += _dot_product_rows(cfg, c * (0.5 if causal else 1.0), seq_len, tokens)
    return out + _other_rows(cfg, c, tokens)


def _row(
    cfg: TransformerConfig, group: str, name: str, op: str, flops_formula: str, params_formula: str, **numbers: Any
) -> OpRow:
    """An OpRow; `numbers` holds flops, params, active_params, count, weight_matmul (defaults: free, per layer)."""
    values = {"flops": 0.0, "params": 0, "count": cfg.n_layers, "weight_matmul": False} | numbers
    values.setdefault("active_params", values["params"])
    return OpRow(
        group=group, name=name, operation=op, flops_formula=flops_formula, params_formula=params_formula, **values
    )


def _matmul(
    cfg: TransformerConfig,
    group: str,
    name: str,
    op: str,
    monomial: str,
    weights: int,
    c: float,
    tokens: float,
    **kw: Any,
) -> OpRow:
    """A weight matmul: 2 c FLOPs per weight per token; `monomial` is its weight count in letters."""
    active = kw.pop("active_params", weights)
    flops = 2.0 * c * active * tokens
    formula = f"{2 * c:g}{kw.pop('k', '')}BT{monomial}"
    return _row(cfg, group, name, op, formula, kw.pop("params_formula", monomial), flops=flops, params=weights,
                     active_params=active, weight_matmul=True, **kw)  # fmt: skip


def _mlp_rows(cfg: TransformerConfig, c: float, tokens: float) -> tuple[OpRow, ...]:
    """Dense layers' MLP (all L layers of a dense model), then the MoE layers' routed experts, shared
    experts and router."""
    if not cfg.is_moe:
        return _expert_rows(cfg, c, tokens, count=cfg.n_layers)
    rows = _expert_rows(cfg, c, tokens, count=cfg.first_dense_layers, tag=" (dense layers)")
    e, k, s, width = cfg.n_experts, cfg.experts_per_token, cfg.n_shared_experts, cfg.expert_d_ff
    routed: dict[str, Any] = {"k": "k", "params_formula": "EDF", "active_params": k * cfg.d_model * width}
    rows += _expert_rows(cfg, c, tokens, count=cfg.moe_layers, width=width, experts=e, **routed)
    shared: dict[str, Any] = {"k": "s", "params_formula": "sDF", "active_params": s * cfg.d_model * width}
    rows += _expert_rows(cfg, c, tokens, count=cfg.moe_layers * bool(s), width=width, experts=s, tag=" (shared)",
                              **shared)  # fmt: skip
    router = _matmul(cfg, "router", "router", r"A[B,T,D] \cdot_D W_{gate}[D,E]", "DE", cfg.d_model * e, c, tokens)
    return rows + (dataclasses.replace(router, count=cfg.moe_layers),)


def _expert_rows(
    cfg: TransformerConfig,
    c: float,
    tokens: float,
    *,
    count: int,
    width: int | None = None,
    experts: int = 1,
    tag: str = "",
    **moe: Any,
) -> tuple[OpRow, ...]:
    """W_in1 (gate), W_in2 (up), their elementwise product and W_out (down), or W_in, act, W_out, of
    `experts` MLPs of `width` (d_ff by default) in `count` layers; none when count is 0."""
    if not count:
        return ()
    D, F = cfg.d_model, cfg.d_ff if width is None else width
    mm = functools.partial(_matmul, cfg, "mlp", monomial="DF", weights=experts * D * F, c=c, tokens=tokens)
    ins = [("W_in1 (gate)", r"A[B,T,D] \cdot_D W_{in1}[D,F]"), ("W_in2 (up)", r"A[B,T,D] \cdot_D W_{in2}[D,F]")]
    if not cfg.gated_mlp:
        ins = [("W_in", r"A[B,T,D] \cdot_D W_{in}[D,F]")]
    rows = tuple(mm(name=name + tag, op=op, count=count, **moe) for name, op in ins)
    act = r"\sigma(A_{in1})[B,T,F] * A_{in2}[B,T,F]" if cfg.gated_mlp else r"\sigma(A_{in})[B,T,F]"
    rows += (_row(cfg, "mlp", "activation" + (" x up" if cfg.gated_mlp else "") + tag, act, "O(BTF)", "", count=count),)
    return rows + (mm(name="W_out (down)" + tag, op=r"A[B,T,F] \cdot_F W_{out}[F,D]", count=count, **moe),)


def qkvo_rows(cfg: TransformerConfig, c: float, tokens: float) -> tuple[OpRow, ...]:
    """The four projections; q, k, v biases (when present) sit in their rows' weights, not their FLOPs."""
    if cfg.kv_lora_rank is not None:
        return _mla_rows(cfg, c, tokens)
    D, N, K, H = cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
    rows = []
    for name, heads, letter, op in (
        ("W_Q", N, "N", r"A[B,T,D] \cdot_D W_Q[D,N,H]"),
        ("W_K", K, "K", r"A[B,T,D] \cdot_D W_K[D,K,H]"),
        ("W_V", K, "K", r"A[B,T,D] \cdot_D W_V[D,K,H]"),
    ):
        bias = heads * H if cfg.qkv_bias else 0
        formula = f"D{letter}H" + (f" + {letter}H" if bias else "")
        row = _matmul(cfg, "qkvo", name, op, f"D{letter}H", D * heads * H, c, tokens, params_formula=formula)
        rows.append(dataclasses.replace(row, params=row.params + bias, active_params=row.params + bias))
    rows.append(_matmul(cfg, "qkvo", "W_O", r"A[B,T,N,H] \cdot_{NH} W_O[N,H,D]", "DNH", D * N * H, c, tokens))
    return tuple(rows)


def _mla_rows(cfg: TransformerConfig, c: float, tokens: float) -> tuple[OpRow, ...]:
    """Multi-head latent attention: queries through a rank-r_q latent (or straight from D), keys and
    values up-projected from the cached rank-r_kv latent plus one shared RoPE key of width R."""
    D, N, H, R, Hv = cfg.d_model, cfg.n_heads, cfg.head_dim, cfg.rope_head_dim, cfg.value_head_dim
    rq, rkv = cfg.q_lora_rank, cfg.kv_lora_rank or 0
    mm = functools.partial(_matmul, cfg, "qkvo", c=c, tokens=tokens)
    if rq is None:
        rows = [mm("W_Q", r"A[B,T,D] \cdot_D W_Q[D,N,H+R]", "DN(H+R)", D * N * (H + R))]
    else:
        rows = [
            mm("W_DQ", r"A[B,T,D] \cdot_D W_{DQ}[D,r_q]", "Dr_q", D * rq),
            mm("W_UQ", r"C_Q[B,T,r_q] \cdot_{r_q} W_{UQ}[r_q,N,H+R]", "r_qN(H+R)", rq * N * (H + R)),
        ]
    return (
        *rows,
        mm("W_DKV", r"A[B,T,D] \cdot_D W_{DKV}[D,r_{kv}+R]", "D(r_{kv}+R)", D * (rkv + R)),
        mm(
            "W_UKV",
            r"C_{KV}[B,T,r_{kv}] \cdot_{r_{kv}} W_{UKV}[r_{kv},N,H+H_v]",
            "r_{kv}N(H+H_v)",
            rkv * N * (H + Hv),
        ),
        mm("W_O", r"A[B,T,N,H_v] \cdot_{NH_v} W_O[N,H_v,D]", "DNH_v", D * N * Hv),
    )


def _dot_product_rows(cfg: TransformerConfig, c: float, seq_len: float, tokens: float) -> tuple[OpRow, ...]:
    """QK^T and PV, 2 c S N H FLOPs per token each (c already halved for a causal mask), and the free
    softmax; with MLA's RoPE dims and value width, 2 c S N (H + R) and 2 c S N H_v."""
    per_head = 2.0 * c * seq_len * cfg.n_heads * tokens
    qk, pv = per_head * (cfg.head_dim + cfg.rope_head_dim), per_head * cfg.value_head_dim
    return (
        _row(cfg, "dot_product", "Q K^T", r"Q[B,T,K,G,H] \cdot_H K[B,S,K,H]", f"{2 * c:g}BTSNH", "", flops=qk),
        _row(cfg, "dot_product", "softmax", r"\mathrm{softmax}_S\, L[B,T,S,K,G]", "O(BTSN)", ""),
        _row(cfg, "dot_product", "P V", r"P[B,T,S,K,G] \cdot_S V[B,S,K,H]", f"{2 * c:g}BTSNH", "", flops=pv),
    )


def _other_rows(cfg: TransformerConfig, c: float, tokens: float) -> tuple[OpRow, ...]:
    """The per-layer norms, the final norm, the embedding lookup and the unembedding."""
    D, V, n = cfg.d_model, cfg.vocab_size, cfg.norms_per_layer
    norm = r"\mathrm{norm}_D\, A[B,T,D]"
    lookup = r"W_{embed}[V,D]\,[\text{tokens}]"
    rows: tuple[OpRow, ...] = (_row(cfg, "norms", f"{n} norms", norm, "O(BTD)", f"{n}D", params=n * D),) if n else ()
    if cfg.qk_norm:
        rows += (_row(cfg, "norms", "q and k norms", norm, "O(BTNH)", "2H", params=2 * cfg.head_dim),)
    latents = [r for r in (cfg.q_lora_rank, cfg.kv_lora_rank) if r is not None]
    if latents:
        rows += (_row(cfg, "norms", "latent norms", norm, "O(BTr)", "r_q + r_{kv}", params=sum(latents)),)
    rows += (
        _row(cfg, "norms", "final norm", norm, "O(BTD)", "D", params=D, count=1),
        _row(cfg, "embedding", "embedding lookup", lookup, "0", "VD", params=V * D, count=1),
    )
    out = _matmul(cfg, "output", "unembedding", r"A[B,T,D] \cdot_D W_{unembed}[D,V]", "DV", D * V, c, tokens, count=1)
    if cfg.tied_embeddings:  # the same matmul, with the embedding's weights
        out = dataclasses.replace(out, params_formula="0 (tied)", params=0, active_params=0)
    return rows + (out,)
