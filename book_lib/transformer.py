"""Transformer bookkeeping: parameter counts, FLOPs per token, KV-cache size and training memory.

One `TransformerConfig` describes a decoder-only Transformer with grouped-query attention, an
(optionally gated) MLP that may be split into experts, RMSNorm weights and an input embedding with
an optional separate output layer. Its methods turn the shapes into counts:

    params per layer  = D (N + 2K) H [+ (N + 2K) H biases] + N H D
                        + E m D F [+ D E router] + n_norm D
    params            = V D + L * (params per layer) + D [+ D V when not tied]
    FLOPs per token   = 2 * (weights touched per token) + 4 L S N H
                        (forward, bidirectional)

with L layers, D = d_model, F = d_ff, N query heads, K key/value heads, H = head_dim, V = vocab,
E experts of m = 3 (gated) or 2 matrices each, n_norm norms per layer and S keys attended to.
The records these methods return live in `breakdowns`; the published configs (`get_model`) in
`models`. Pure math: no JAX here.

Book: Part 4 (Transformers), "Global FLOPs and Params Calculation"; Part 6 (Training LLaMA 3 on TPUs).
"""

from __future__ import annotations

from dataclasses import dataclass

from book_lib import checks, op_rows
from book_lib.breakdowns import FlopsBreakdown, OpRow, ParamBreakdown, TrainingMemory
from book_lib.roofline import OpCost

__all__ = [
    "TransformerConfig",
    "REMAT_POLICIES",
    "SAVE_ALL_D_MULTIPLE",
    "attention_cost",
    "score_bytes",
    "moe_critical_batch",
]

REMAT_POLICIES = ("none", "full", "mlp_matmuls", "big_matmuls", "checkpoints")
# The book's rough tally of intermediates a layer keeps per token without rematerialisation, in units
# of one d_model-wide array (Part 4, "Gradient checkpointing").
SAVE_ALL_D_MULTIPLE = 20
_MATMUL_GROUPS = ("layers", "qkvo", "model")
# The field of `ParamBreakdown` / `FlopsBreakdown` that each group of `OpRow` (`OP_GROUPS`) feeds.
_PARAM_FIELD = {"mlp": "mlp", "router": "router", "qkvo": "attention", "norms": "norms", "embedding": "embedding"}
_PARAM_FIELD["output"] = "output"
_FLOPS_FIELD = {"mlp": "mlp_flops", "router": "router_flops", "qkvo": "qkvo_flops", "output": "output_flops"}
_FLOPS_FIELD["dot_product"] = "attention_flops"


@dataclass(frozen=True, slots=True, kw_only=True)
class TransformerConfig:
    """Shapes of a decoder-only Transformer; every count below is derived from these fields.

    Attributes:
        n_layers: L, Transformer blocks.
        d_model: D, width of the residual stream.
        d_ff: F, hidden width of ONE expert's MLP.
        n_heads: N, query heads.
        n_kv_heads: K, key/value heads (K = N: multi-head, K = 1: multi-query); must divide N.
        head_dim: H, width of one head (need not equal D / N).
        vocab_size: V, rows of the embedding table.
        tied_embeddings: the output layer reuses the input embedding (no separate D x V matrix).
        gated_mlp: three MLP matrices (two up-projections multiplied elementwise, one down) instead of two.
        n_experts: E, MLP copies per layer (1 for a dense model).
        experts_per_token: k, experts each token is routed to (k <= E).
        qkv_bias: the q, k and v projections carry a bias vector.
        norms_per_layer: D-wide norm scale vectors per block (2 for pre-norm, 4 for Gemma 2's sandwich norm).
        max_positions: positions the model was trained for (config.json's max_position_embeddings): the
            longest sequence or context it takes; None when unknown (no limit is checked).
        moe_d_ff: hidden width of one routed (or shared) expert, None: d_ff (config.json's
            moe_intermediate_size); d_ff is then the width of the dense layers' MLP.
        n_shared_experts: experts every token passes through besides its k routed ones (DeepSeek's).
        first_dense_layers: layers at the bottom with a dense MLP of width d_ff instead of experts
            (DeepSeek's first_k_dense_replace).
        kv_lora_rank: multi-head latent attention (MLA) when set: keys and values are projected up from
            a cached latent of this width (DeepSeek-V2/V3); head_dim is then the query/key width
            without RoPE (qk_nope_head_dim).
        q_lora_rank: MLA's query latent width, None: queries projected straight from D.
        rope_head_dim: MLA's decoupled RoPE width per head (qk_rope_head_dim): one shared key of this
            width is cached per token, and each query head gets this many more dims.
        v_head_dim: width of one value head, None: head_dim.
        qk_norm: one head_dim-wide norm on the queries and one on the keys per layer (Qwen3).
        name: preset name (`"llama-3-70b"`), empty for ad-hoc configs.
        source: where the numbers come from (the Hugging Face config.json URL for released models).

    Every field is a keyword (`TransformerConfig(n_layers=..., d_model=..., ...)`), so two head
    counts cannot trade places unnoticed.

    Raises:
        ValueError: a non-positive size, N not divisible by K, k > E, or a negative norm count.
    """

    n_layers: int
    d_model: int
    d_ff: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    vocab_size: int
    tied_embeddings: bool = False
    gated_mlp: bool = True
    n_experts: int = 1
    experts_per_token: int = 1
    qkv_bias: bool = False
    norms_per_layer: int = 2
    max_positions: int | None = None
    moe_d_ff: int | None = None
    n_shared_experts: int = 0
    first_dense_layers: int = 0
    kv_lora_rank: int | None = None
    q_lora_rank: int | None = None
    rope_head_dim: int = 0
    v_head_dim: int | None = None
    qk_norm: bool = False
    name: str = ""
    source: str = ""

    def __post_init__(self) -> None:
        where = f" (model {self.name!r})" if self.name else ""
        sizes = (
            "n_layers",
            "d_model",
            "d_ff",
            "n_heads",
            "n_kv_heads",
            "head_dim",
            "vocab_size",
            "n_experts",
            "experts_per_token",
        )
        for attr in sizes:
            checks.count(attr, getattr(self, attr))
        for attr in ("norms_per_layer", "n_shared_experts", "first_dense_layers", "rope_head_dim"):
            checks.count(attr, getattr(self, attr), minimum=0)
        for attr in ("max_positions", "moe_d_ff", "kv_lora_rank", "q_lora_rank", "v_head_dim"):
            if getattr(self, attr) is not None:
                checks.count(attr, getattr(self, attr))
        if self.first_dense_layers > self.n_layers:
            raise ValueError(
                f"first_dense_layers={self.first_dense_layers!r}: more than n_layers={self.n_layers}{where}; "
                f"allowed: 0 .. {self.n_layers}"
            )
        if self.kv_lora_rank is None and (self.q_lora_rank is not None or self.rope_head_dim):
            raise ValueError(
                f"kv_lora_rank=None: q_lora_rank and rope_head_dim describe latent attention{where}; "
                "allowed: set kv_lora_rank with them, or neither"
            )
        for attr in ("tied_embeddings", "gated_mlp", "qkv_bias", "qk_norm"):
            if not isinstance(getattr(self, attr), bool):
                raise ValueError(f"{attr}={getattr(self, attr)!r}: not a bool{where}; allowed: True, False")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(
                f"n_kv_heads={self.n_kv_heads!r}: does not divide n_heads={self.n_heads}{where}; "
                f"allowed: a divisor of {self.n_heads}"
            )
        if self.experts_per_token > self.n_experts:
            raise ValueError(
                f"experts_per_token={self.experts_per_token!r}: more than n_experts={self.n_experts}{where}; "
                f"allowed: 1 .. {self.n_experts}"
            )

    def check_positions(self, arg: str, n_tokens: int) -> int:
        """`n_tokens` (a sequence or context length) as a count the model has positions for.

        Raises:
            ValueError: not a count, or more tokens than `max_positions` (when known).
        """
        n = checks.count(arg, n_tokens)
        if self.max_positions is not None and n > self.max_positions:
            name = self.name or "this model"
            raise ValueError(
                f"{arg}={n_tokens!r}: more tokens than {name}'s {self.max_positions:,} positions; "
                f"allowed: 1 to {self.max_positions}"
            )
        return n

    # ----- parameters -------------------------------------------------------------------------------

    @property
    def is_moe(self) -> bool:
        """True when the MLP is split into more than one expert."""
        return self.n_experts > 1

    @property
    def mlp_matrices(self) -> int:
        """Weight matrices in one expert's MLP: 3 when gated, else 2 (count)."""
        return 3 if self.gated_mlp else 2

    @property
    def qkvo_weights_per_layer(self) -> int:
        """Weights of the q, k, v and o projections of one layer, biases excluded (count).

        = D N H (q) + 2 D K H (k, v) + N H D (o) = 2 D (N + K) H; with latent attention, the sum of
        its five (or four) matrices (`op_rows.qkvo_rows`).
        """
        return (
            sum(row.params for row in op_rows.qkvo_rows(self, 1, 1))
            - self.qkv_bias * (self.n_heads + 2 * self.n_kv_heads) * self.head_dim
        )

    def param_breakdown(self, *, active: bool = False) -> ParamBreakdown:
        """Parameters by component (counts); with `active=True` only the k routed experts count.

            embedding = V D
            attention = L (D N H + 2 D K H + N H D + [(N + 2K) H if qkv_bias])
            mlp       = L E' m D F, E' = E (all) or k (active),
                        m = 3 gated / 2 plain
            router    = L D E when E > 1, else 0
                        (a token always goes through the whole gate)
            norms     = L n_norm D + D (the final norm)
            output    = D V, or 0 when the embedding is tied

        Book: Part 4 (Transformers), "Global FLOPs and Params Calculation"; Part 6, "Counting parameters and FLOPs".
        """
        totals = dict.fromkeys(_PARAM_FIELD.values(), 0)
        for row in self.op_rows(0, batch_tokens=0):
            if row.group in _PARAM_FIELD:
                totals[_PARAM_FIELD[row.group]] += row.count * (row.active_params if active else row.params)
        return ParamBreakdown(**totals)

    def param_count(self) -> int:
        """Every weight in the checkpoint (count): `param_breakdown().total`.

        Book: Part 4 (Transformers), "Global FLOPs and Params Calculation".
        """
        return self.param_breakdown().total

    def active_param_count(self) -> int:
        """Weights one token passes through (count): as `param_count` but with k of the E experts.

        Book: Part 4 (Transformers), "Sparsity and Mixture-of-Experts".
        """
        return self.param_breakdown(active=True).total

    def experts_touched(self, batch_tokens: int) -> float:
        """Expected experts of one layer that at least one of `batch_tokens` tokens is routed to (count).

        E (1 - (1 - k / E)^B): each token picks k of the E experts, uniformly and independently of the
        other tokens; 1 for a dense model. Mixtral 8x7B (k = 2 of 8): 2 at B = 1, 7.2 at B = 8, 7.99 at 32.
        Book: Part 4 (Transformers), "Sparsity and Mixture-of-Experts".

        Raises:
            ValueError: batch_tokens not a count.
        """
        b, e = checks.count("batch_tokens", batch_tokens), self.n_experts
        return e * (1 - (1 - self.experts_per_token / e) ** b)

    def params_read_per_step(self, batch_tokens: int) -> float:
        """Weights a decode step over `batch_tokens` tokens reads from HBM (count).

        P - routed + routed * experts_touched(B) / E (routed = `routed_expert_params`): every weight but the
        routed experts, and the experts the batch touches; `param_count()` for a dense model. Mixtral 8x7B
        at B = 1: 12.9B of its 46.7B.
        Book: Part 7 (Inference), equation (4) (the weights term); Part 4, "Sparsity and Mixture-of-Experts".
        """
        routed = self.routed_expert_params
        return self.param_count() - routed + routed * self.experts_touched(batch_tokens) / self.n_experts

    # ----- FLOPs ------------------------------------------------------------------------------------

    def flops_breakdown(self, seq_len: float, *, training: bool = True, causal: bool = False) -> FlopsBreakdown:
        """FLOPs for ONE token attending to `seq_len` keys, split by component (FLOPs).

        Convention (the book's): a matmul costs 2 FLOPs per weight per token (one multiply, one add);
        the embedding lookup, norms, biases, activations and softmax are free.
            qkvo      = 2 L (2 D N H + 2 D K H)
            mlp       = 2 L k m D F            (the k active experts only)
            router    = 2 L D E                (MoE only)
            output    = 2 D V                  (the unembedding runs even when tied)
            attention = 2 * 2 L S N H          (QK^T and AV; halved when causal)
        Training multiplies every term by 3: the backward pass costs twice the forward one.
        Book: Part 4 (Transformers), "Forwards and reverse FLOPs" and "Global FLOPs and Params Calculation".

        Args:
            seq_len: S, keys each query attends to (count, >= 0); 0 gives the 6 * params rule.
            training: forward plus backward (x3) when True, forward only when False.
            causal: each query sees on average half the keys, so the attention term is halved.

        Raises:
            ValueError: a negative or non-finite seq_len, or non-bool flags.
        """
        totals = dict.fromkeys(_FLOPS_FIELD.values(), 0.0)
        for row in self.op_rows(seq_len, training=training, causal=causal):
            if row.group in _FLOPS_FIELD:
                totals[_FLOPS_FIELD[row.group]] += row.total_flops
        return FlopsBreakdown(**totals)

    def op_rows(
        self, seq_len: float, *, batch_tokens: float = 1, training: bool = True, causal: bool = False
    ) -> tuple[OpRow, ...]:
        """Every operation of the model with its FLOPs and weights: the book's accounting tables (rows).

        For batch_tokens = B T tokens, each attending to S = seq_len keys, c = 3 when training else 1:
            weight matmul A[.., P] . W[P, Q]:  2 c B T P Q FLOPs,
                                               P Q weights (6BTDF for W_in1)
            QK^T and PV, each:                 2 c B T S N H FLOPs
                                               (halved when causal)
            norms, softmax, gating, lookup:    0 FLOPs (the book's O(BTD),
                                               O(BTSN), O(BTF))
        Groups follow `breakdowns.OP_GROUPS`; `param_breakdown` and `flops_breakdown` are sums over these rows.
        Book: Part 4 (Transformers), "Global FLOPs and Params Calculation" (its MLP, attention and
        other-operations tables).

        Args:
            seq_len: S, keys each query attends to (count, >= 0).
            batch_tokens: B T, tokens processed (count, >= 0); 1 gives FLOPs per token.
            training: forward plus backward (x3) when True, forward only when False.
            causal: each query sees on average half the keys, so the two attention products halve.

        Raises:
            ValueError: a negative or non-finite seq_len or batch_tokens, or non-bool flags.
        """
        checks.non_negative("seq_len", seq_len)
        checks.non_negative("batch_tokens", batch_tokens)
        for flag, value in (("training", training), ("causal", causal)):
            if not isinstance(value, bool):
                raise ValueError(f"{flag}={value!r}: not a bool; allowed: True, False")
        return op_rows.rows(self, 3 if training else 1, seq_len, batch_tokens, causal=causal)

    @property
    def expert_d_ff(self) -> int:
        """Hidden width of one expert's MLP: moe_d_ff, or d_ff when none is set (count)."""
        return self.d_ff if self.moe_d_ff is None else self.moe_d_ff

    @property
    def moe_layers(self) -> int:
        """Layers whose MLP is split into experts: L - first_dense_layers, 0 for a dense model (count)."""
        return self.n_layers - self.first_dense_layers if self.is_moe else 0

    @property
    def routed_expert_params(self) -> int:
        """Weights of the routed experts, which a token reaches only through the router (count).

        = L_moe E m D F_e (L_moe = `moe_layers`, F_e = `expert_d_ff`); 0 for a dense model.
        """
        return self.moe_layers * self.n_experts * self.mlp_matrices * self.d_model * self.expert_d_ff

    def params_held(self, expert: int = 1) -> float:
        """Weights one chip of an `expert`-way expert-parallel group holds, before any other sharding
        (count): P - routed (1 - 1 / expert), every weight but the routed experts, and 1 / expert of
        those. Book: Part 12 (expert parallelism); Part 5 (what a chip holds).

        Raises:
            ValueError: expert not a count.
        """
        return self.param_count() - self.routed_expert_params * (1 - 1 / checks.count("expert", expert))

    @property
    def value_head_dim(self) -> int:
        """Width of one value head: v_head_dim, or head_dim when none is set (count)."""
        return self.head_dim if self.v_head_dim is None else self.v_head_dim

    def flops_per_token(self, seq_len: float, *, training: bool = True, causal: bool = False) -> float:
        """FLOPs to process one token with `seq_len` keys in view: `flops_breakdown(...).total_flops`.

        = factor * (2 * matmul weights used per token + 4 L S N H [/ 2 if causal]), factor 3 when training.
        Book: Part 4 (Transformers), "General rule of thumb for Transformer FLOPs".
        """
        return self.flops_breakdown(seq_len, training=training, causal=causal).total_flops

    def _matmul_group_flops(self, breakdown: FlopsBreakdown, against: str) -> float:
        if against not in _MATMUL_GROUPS:
            raise ValueError(f"against={against!r}: unknown matmul group; allowed: {', '.join(_MATMUL_GROUPS)}")
        if against == "qkvo":
            return breakdown.qkvo_flops
        return breakdown.layer_matmul_flops if against == "layers" else breakdown.matmul_flops

    def attention_flops_ratio(self, seq_len: float, *, causal: bool = False, against: str = "layers") -> float:
        """Dot-product attention FLOPs over weight-matmul FLOPs at `seq_len` (ratio; same in training).

        ratio = 4 L S N H / matmul, with matmul one of
            "layers": qkvo + mlp + router (the book's per-layer comparison;
                      S / 8D for MHA, F = 4D, gated)
            "qkvo":   the four attention projections only
            "model":  every weight matmul, the output layer included
        Book: Part 4 (Transformers), "Fractional cost of attention with context length".

        Raises:
            ValueError: negative seq_len or an unknown `against`.
        """
        breakdown = self.flops_breakdown(seq_len, training=False, causal=causal)
        return breakdown.attention_flops / self._matmul_group_flops(breakdown, against)

    def attention_crossover_seq_len(self, *, causal: bool = False, against: str = "layers") -> float:
        """Keys per query at which dot-product attention costs as much as the chosen matmuls (count).

        S* = matmul / (4 L N H) (times 2 when causal); `against` as in `attention_flops_ratio`.
        MHA, gated, F = 4D: S* = 8D against "layers" and S* = 2D against "qkvo".
        Book: Part 4 (Transformers), "Fractional cost of attention with context length"; Question 4.5.
        """
        per_key = self.flops_breakdown(1, training=False, causal=causal)
        return self._matmul_group_flops(per_key, against) / per_key.attention_flops

    # ----- memory -----------------------------------------------------------------------------------

    def kv_cache_bytes_per_token(self, dtype: str = "bf16") -> float:
        """Bytes of keys and values cached for one token of one sequence, in `dtype` (bytes).

        kv = L * kv_values_per_token_layer * p, p the bytes of a `dtype` value (2 for bf16, 1 for int8):
        2 K H per layer (keys and values), or r_kv + R for multi-head latent attention
        Book: Part 4 (Transformers), "Key-Value (KV) caching"; Part 7, "What about memory?".

        Raises:
            ValueError: an unknown dtype (`checks.DTYPES`).
        """
        return self.n_layers * self.kv_values_per_token_layer * checks.dtype_bytes(dtype)

    @property
    def kv_values_per_token_layer(self) -> int:
        """Values one layer caches per token (count): 2 K H (keys and values), or r_kv + R, the latent and
        the shared RoPE key of multi-head latent attention (DeepSeek-V3: 512 + 64 = 576 against 2 x 128 x 128)."""
        if self.kv_lora_rank is not None:
            return self.kv_lora_rank + self.rope_head_dim
        return 2 * self.n_kv_heads * self.head_dim

    def saved_values_per_token_layer(self, remat: str = "full", *, checkpoints_per_layer: float | None = None) -> float:
        """Activation values one layer keeps per token for the backward pass under `remat` (count).

            "none":        20 D  (the book's rough count of every intermediate;
                           nothing recomputed)
            "full":        D  (only the layer input; the backward pass reruns
                           the whole forward: the book's "block remat")
            "mlp_matmuls": k ((m - 1) F + D)  (outputs of the MLP matmuls;
                           m = 3 gated gives 2F + D)
            "big_matmuls": N H + 2 K H + D + k ((m - 1) F + D)
                           (outputs of q, k, v, o and the MLP matmuls)
            "checkpoints": checkpoints_per_layer * D  (the book's "c checkpoints
                           per layer", e.g. 4 in Part 6)

        Widths are the real output widths; the book's "about 7 per layer" for big matmuls counts each as D.
        Book: Part 4 (Transformers), "Gradient checkpointing"; Part 5, Q2; Part 6, "Counting parameters and FLOPs".

        Raises:
            ValueError: unknown policy, or checkpoints_per_layer given with another policy / missing for checkpoints.
        """
        checks.one_of("remat", remat, REMAT_POLICIES)
        if (remat == "checkpoints") != (checkpoints_per_layer is not None):
            raise ValueError(
                f"checkpoints_per_layer={checkpoints_per_layer!r}: only used with remat='checkpoints' (got {remat!r}); "
                "allowed: a number >= 0 with 'checkpoints', None otherwise"
            )
        D = self.d_model
        k = self.experts_per_token + self.n_shared_experts if self.is_moe else 1
        mlp_outputs = k * ((self.mlp_matrices - 1) * self.expert_d_ff + D)
        if remat == "checkpoints" and checkpoints_per_layer is not None:
            return checks.non_negative("checkpoints_per_layer", checkpoints_per_layer) * D
        return {
            "none": SAVE_ALL_D_MULTIPLE * D,
            "full": D,
            "mlp_matmuls": mlp_outputs,
            "big_matmuls": (self.n_heads + 2 * self.n_kv_heads) * self.head_dim + D + mlp_outputs,
        }[remat]

    def saved_arrays_per_layer(self, remat: str = "full") -> int:
        """Activation arrays of shape [B, T, width] one layer keeps for the backward pass, any width (count).

            "none":        20, the book's rough tally of every intermediate
                           (`SAVE_ALL_D_MULTIPLE`)
            "full":        1, the layer's input
            "big_matmuls": one output per weight matmul of a layer, counted from
                           `op_rows`: 4 projections + k m MLP matmuls = 7 for a dense
                           gated layer (the book's "about 7"; the small MoE router's
                           output is left out, as in `saved_values_per_token_layer`)
            "mlp_matmuls": the k m MLP matmul outputs only
        `saved_values_per_token_layer` adds up the same arrays by their real widths (N H, K H, F, D).
        Book: Part 4 (Transformers), "Gradient checkpointing"; Problem 4.6.

        Raises:
            ValueError: an unknown policy, or "checkpoints" (its count is the caller's).
        """
        checks.one_of("remat", remat, REMAT_POLICIES[:-1])
        if remat in ("none", "full"):
            return SAVE_ALL_D_MULTIPLE if remat == "none" else 1
        groups = ("mlp",) if remat == "mlp_matmuls" else ("mlp", "qkvo")
        per_layer = (r for r in self.op_rows(0) if r.weight_matmul and r.count == self.n_layers and r.group in groups)
        return sum(self.experts_per_token if r.group == "mlp" else 1 for r in per_layer)

    def training_memory(
        self,
        *,
        batch_tokens: float,
        param_dtype: str = "bf16",
        grad_dtype: str | None = "bf16",
        optimizer_state_bytes_per_param: float = 8,
        activation_dtype: str = "bf16",
        remat: str = "full",
        checkpoints_per_layer: float | None = None,
    ) -> TrainingMemory:
        """Bytes a training step holds across all chips, by kind (bytes).

            params_bytes      = P * bytes of param_dtype
                                (P = param_count(), every expert)
            grads_bytes       = P * bytes of grad_dtype (0 when grad_dtype is None)
            optimizer_bytes   = P * optimizer_state_bytes_per_param
                                (Adam: two fp32 moments = 8)
            activations_bytes = batch_tokens * L
                                * saved_values_per_token_layer(remat)
                                * bytes of activation_dtype

        The book's tallies (Part 5 Question 2, Part 6) count no gradients: pass grad_dtype=None to match
        them. Logits, softmax buffers and other temporaries that the policy does not name are left out.
        Book: Part 4 (Transformers), "Gradient checkpointing"; Part 6, "Counting parameters and FLOPs".

        Args:
            batch_tokens: tokens per step, B * T (count, >= 0).
            param_dtype, grad_dtype: dtypes of the weights and gradients (`checks.DTYPES`; grad_dtype
                None: no gradients kept).
            optimizer_state_bytes_per_param: optimizer state per parameter (bytes, >= 0; 8 for Adam in fp32).
            activation_dtype: the dtype of a saved activation value.
            remat: one of `REMAT_POLICIES`, see `saved_values_per_token_layer`.
            checkpoints_per_layer: D-wide arrays saved per layer, only with remat="checkpoints".

        Raises:
            ValueError: a negative amount, an unknown dtype or an unknown policy.
        """
        checks.non_negative("batch_tokens", batch_tokens)
        checks.non_negative("optimizer_state_bytes_per_param", optimizer_state_bytes_per_param)
        bytes_per_param = checks.dtype_bytes(param_dtype, "param_dtype")
        bytes_per_grad = 0.0 if grad_dtype is None else checks.dtype_bytes(grad_dtype, "grad_dtype")
        bytes_per_activation = checks.dtype_bytes(activation_dtype, "activation_dtype")
        saved = self.saved_values_per_token_layer(remat, checkpoints_per_layer=checkpoints_per_layer)
        n_params = self.param_count()
        return TrainingMemory(
            params_bytes=float(n_params * bytes_per_param),
            grads_bytes=float(n_params * bytes_per_grad),
            optimizer_bytes=float(n_params * optimizer_state_bytes_per_param),
            activations_bytes=float(batch_tokens * self.n_layers * saved * bytes_per_activation),
            remat=remat,
        )


# ----- attention and mixture-of-experts arithmetic ----------------------------------------------------


def attention_cost(T: int, S: int, *, n_heads: int, n_kv_heads: int, head_dim: int, dtype: str = "bf16") -> OpCost:
    """FLOPs and HBM bytes of dot-product attention for one sequence and one layer (QK^T, then AV).

    flops = 4 T S N H (two matmuls of 2 T S H per query head);
    bytes = p (2 T N H + 2 S K H), p the bytes of a `dtype` value: read Q, write the output; read K
    and V once each. With G = N / K query heads per KV head, the intensity is T S G / ((T G + S) p / 2)
    per KV head: about T when S >> T G (decode: one query, intensity about G), and T G / (G + 1) at
    S = T (prefill). The scores stay on chip (a flash-attention kernel), so they cost no HBM bytes.
    Book: Part 4 (Transformers), "What about attention?"; Part 7 (Inference), "attention intensity".

    Raises:
        ValueError: a length or head count that is not a count, K not dividing N, an unknown dtype.
    """
    for name, value in (("T", T), ("S", S), ("n_heads", n_heads), ("n_kv_heads", n_kv_heads), ("head_dim", head_dim)):
        checks.count(name, value)
    bytes_per_value = checks.dtype_bytes(dtype)
    if n_heads % n_kv_heads:
        raise ValueError(f"n_kv_heads={n_kv_heads!r}: does not divide n_heads={n_heads}; allowed: a divisor")
    flops = 4.0 * T * S * n_heads * head_dim
    return OpCost(flops=flops, bytes=float(bytes_per_value * (2 * T * n_heads + 2 * S * n_kv_heads) * head_dim))


def score_bytes(q_len: int, k_len: int, *, block_size: int | None = None, dtype: str = "fp32") -> float:
    """Bytes of attention scores held at once for one head, in `dtype` (bytes; p the bytes of a value).

    naive: q_len * k_len * p; blockwise (flash): q_len * block_size * p.
    Book: Part 4 (Transformers), Appendix A.

    Raises:
        ValueError: a length or block size that is not a count, or an unknown dtype.
    """
    checks.count("q_len", q_len)
    checks.count("k_len", k_len)
    width = k_len if block_size is None else checks.count("block_size", block_size)
    return float(q_len * width * checks.dtype_bytes(dtype))


def moe_critical_batch(
    n_experts: int, experts_per_token: int, flops_per_s: float, bytes_per_s: float, *, param_dtype: str = "int8"
) -> float:
    """Tokens per batch above which an MoE layer's expert matmuls are compute-bound (tokens).

    Each expert holds D F weights and sees k B / E of the B tokens: 2 (k B / E) D F FLOPs over
    p D F bytes (p the bytes of a `param_dtype` value), so the intensity 2 k B / (E p) passes the
    chip's critical intensity flops_per_s / bytes_per_s at
        B* = (flops_per_s / bytes_per_s) * E * p / (2 k)
    (activations neglected, B << D, F). Book: Part 4 (Transformers), "Sparsity and Mixture-of-Experts".

    Raises:
        ValueError: k not in 1..E, a non-positive rate, or an unknown dtype.
    """
    checks.count("n_experts", n_experts)
    checks.count("experts_per_token", experts_per_token)
    if experts_per_token > n_experts:
        raise ValueError(f"experts_per_token={experts_per_token!r}: more than n_experts={n_experts}; allowed: 1..E")
    ridge = checks.positive("flops_per_s", flops_per_s) / checks.positive("bytes_per_s", bytes_per_s)
    return ridge * n_experts * checks.dtype_bytes(param_dtype, "param_dtype") / (2 * experts_per_token)
