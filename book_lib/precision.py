"""Run float32 matmuls on the CPU the way an accelerator runs them by default.

A TPU multiplies float32 matrices in one bf16 pass unless asked for more (`precision="highest"`),
and an Ampere or newer GPU in TF32. Code checked only on a CPU, where float32 is exact, can then
fail on the reader's accelerator. `emulate("bf16")` (or `"tf32"`) makes every float32
`dot_general` that XLA lowers for the CPU from then on round its operands first: to 8 bits of
mantissa for bf16, 11 for TF32 (counting the implicit bit), accumulating in float32 as the hardware
does. A dot asked for `"high"` or `"highest"`, explicitly or under `jax.default_matmul_precision`,
is left exact. `devices.setup()` calls it when the environment variable named by `ENV_VAR` is set,
which is how the test suite runs every notebook under accelerator precision.

Book: Part 1 (Rooflines), on bf16 matmuls with float32 accumulation; JAX's `Precision` docs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence

    from jax._src.interpreters.mlir import LoweringRuleContext
    from jax._src.lax.lax import CanonicalPrecision
    from jax._src.lib.mlir import ir

__all__ = ["ENV_VAR", "MANTISSA_BITS", "emulate", "emulated"]

ENV_VAR = "BOOK_LIB_MATMUL_PRECISION"
# Explicit mantissa bits (without the implicit leading 1) that survive the rounding.
MANTISSA_BITS = {"bf16": 7, "tf32": 10}

_EMULATED: str | None = None


def emulated() -> str | None:
    """The rounding `emulate` installed in this process (`"bf16"`, `"tf32"`), or None."""
    return _EMULATED


def _rounds(precision: CanonicalPrecision, index: int) -> bool:
    """True when operand `index` of a dot with canonical `precision` runs at the default precision."""
    from jax.lax import Precision

    if precision is None:
        return True
    if isinstance(precision, tuple):
        return precision[index] == Precision.DEFAULT
    return False  # an explicit dot algorithm says exactly what it wants


def emulate(kind: str) -> None:
    """Round float32 matmul operands to `kind` in every CPU dot lowered from now on (idempotent).

    Args:
        kind: `"bf16"` (a TPU's default pass) or `"tf32"` (an Ampere+ GPU's default).

    Raises:
        ValueError: unknown `kind`, or a different kind is already installed.
    """
    global _EMULATED
    if kind not in MANTISSA_BITS:
        raise ValueError(f"kind={kind!r}: unknown matmul precision; allowed: {', '.join(MANTISSA_BITS)}")
    if _EMULATED == kind:
        return
    if _EMULATED is not None:
        raise ValueError(f"kind={kind!r}: {_EMULATED!r} is already emulated in this process; allowed: {_EMULATED!r}")
    import numpy as np
    from jax._src.interpreters import mlir
    from jax._src.lax.lax import dot_general_p
    from jax._src.lib.mlir.dialects import hlo

    exact = mlir._platform_specific_lowerings["cpu"][dot_general_p]
    bits = MANTISSA_BITS[kind]

    def rounded(
        ctx: LoweringRuleContext, lhs: ir.Value, rhs: ir.Value, *, precision: CanonicalPrecision, **params: Any
    ) -> Sequence[ir.Value | Sequence[ir.Value]]:
        operands = []
        for index, (value, aval) in enumerate(zip((lhs, rhs), ctx.avals_in, strict=True)):
            # `avals_in` is typed as core.AbstractValue; a dot's operands are ShapedArrays, which have a dtype.
            if aval.dtype == np.float32 and _rounds(precision, index):  # type: ignore[attr-defined]
                value = hlo.reduce_precision(value, mlir.i32_attr(8), mlir.i32_attr(bits))
            operands.append(value)
        return exact.rule(ctx, *operands, precision=precision, **params)

    mlir.register_lowering(dot_general_p, rounded, platform="cpu")
    _EMULATED = kind
