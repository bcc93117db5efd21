"""The records a Transformer's accounting returns: parameter, FLOP and memory breakdowns, and table rows.

`TransformerConfig` (in `transformer`) fills them: `param_breakdown` gives a `ParamBreakdown`,
`flops_breakdown` a `FlopsBreakdown`, `op_rows` one `OpRow` per operation (grouped by `OP_GROUPS`)
and `training_memory` a `TrainingMemory`. Each is a frozen keyword-only dataclass of counts (params),
FLOPs or bytes whose properties add its parts; none computes anything from a model's shapes.

Book: Part 4 (Transformers), "Global FLOPs and Params Calculation" and "Gradient checkpointing".
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

__all__ = ["ParamBreakdown", "FlopsBreakdown", "OpRow", "OP_GROUPS", "MemoryBytes", "TrainingMemory"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ParamBreakdown:
    """Parameter counts of one model split by component; `total` is their sum (counts).

    embedding = V D; attention = L (2 D N H + 2 D K H [+ (N + 2K) H]); mlp = L E_used m D F;
    router = L D E (MoE only); norms = L n_norm D + D; output = D V (0 when tied).
    """

    embedding: int
    attention: int
    mlp: int
    router: int
    norms: int
    output: int

    @property
    def total(self) -> int:
        """Sum of all components (count)."""
        return self.embedding + self.attention + self.mlp + self.router + self.norms + self.output

    def as_dict(self) -> dict[str, int]:
        """The components as a plain dict, in field order (for tables and plots)."""
        return asdict(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class FlopsBreakdown:
    """FLOPs spent on ONE token, split by where they go; `total_flops` is their sum.

    qkvo_flops: the four attention projections; mlp_flops: the MLPs of the active experts;
    router_flops: the MoE gate; output_flops: the unembedding; attention_flops: the two products
    with the keys and values (QK^T and AV). All already include the training factor when asked for.
    """

    qkvo_flops: float
    mlp_flops: float
    router_flops: float
    output_flops: float
    attention_flops: float

    @property
    def layer_matmul_flops(self) -> float:
        """Weight matmuls inside the layers: qkvo + mlp + router (FLOPs)."""
        return self.qkvo_flops + self.mlp_flops + self.router_flops

    @property
    def matmul_flops(self) -> float:
        """Every weight matmul, the output layer included (FLOPs)."""
        return self.layer_matmul_flops + self.output_flops

    @property
    def total_flops(self) -> float:
        """Weight matmuls plus dot-product attention (FLOPs)."""
        return self.matmul_flops + self.attention_flops


# Groups of `OpRow`, in table order: the field of `ParamBreakdown` / `FlopsBreakdown` each one feeds.
OP_GROUPS = ("mlp", "router", "qkvo", "dot_product", "norms", "embedding", "output")


@dataclass(frozen=True, slots=True, kw_only=True)
class OpRow:
    """One operation of a model, as a row of the book's accounting tables (counts and FLOPs).

    `operation` (contracted dimensions under the dot), `flops_formula` and `params_formula` are
    LaTeX in the book's letters (B batch, T queries, S keys, D, F, N, K, G = N / K, H, V, E experts,
    k active); `flops` and `params` are the numbers for ONE occurrence, `count` how many the model
    holds (L for a layer's operation, 1 for the embedding, final norm and output layer).
    `active_params` are the weights one token passes through (k of the E experts); `weight_matmul`
    marks a product with a weight matrix (the tied unembedding included, whose weights the embedding
    row counts). Free operations (norms, softmax, gating) have flops 0 and an O(...) formula.
    Book: Part 4 (Transformers), "Global FLOPs and Params Calculation".
    """

    group: str
    name: str
    operation: str
    flops_formula: str
    params_formula: str
    flops: float
    params: int
    active_params: int
    count: int
    weight_matmul: bool

    @property
    def total_flops(self) -> float:
        """FLOPs of every occurrence: count * flops (FLOPs)."""
        return self.count * self.flops

    @property
    def total_params(self) -> int:
        """Weights of every occurrence: count * params (count)."""
        return self.count * self.params


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryBytes:
    """Bytes a training step holds, by kind: the record `TrainingMemory` (all chips) and
    `training.MemoryPerChip` (one chip) both are.

    Attributes:
        params_bytes, grads_bytes, optimizer_bytes, activations_bytes: by kind (bytes).
    """

    params_bytes: float
    grads_bytes: float
    optimizer_bytes: float
    activations_bytes: float

    @property
    def total_bytes(self) -> float:
        """Parameters + gradients + optimizer state + saved activations (bytes)."""
        return self.params_bytes + self.grads_bytes + self.optimizer_bytes + self.activations_bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainingMemory(MemoryBytes):
    """Bytes one training step keeps alive, summed over all chips (divide by the chip count yourself).

    params_bytes = P p_param; grads_bytes = P p_grad; optimizer_bytes = P optimizer_state_bytes_per_param;
    activations_bytes = batch_tokens L a p_act, with P every parameter of the checkpoint, a the values saved
    per token per layer (see `remat`) and p the bytes of each dtype (`TransformerConfig.training_memory`).
    """

    remat: str
