"""Read compiled XLA programs: count collectives, normalise `cost_analysis()`.

Book: Part 9 (Profiling), "How to Read an XLA Op"; Part 3 for the collectives themselves.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from book_lib import checks, collectives, hlo_arrays

if TYPE_CHECKING:
    from collections.abc import Callable

    import jax

__all__ = [
    "COLLECTIVES",
    "collective_counts",
    "collective_elements",
    "permute_traffic",
    "op_lines",
    "hlo_text",
    "compile_on_cpu",
    "Cost",
    "cost",
]

COLLECTIVES = tuple(names.hlo for names in collectives.NAMES.values())

# The op of one instruction: "%name = type op(" or "%name = type op-start(" ("-done" is not matched).
_OP = re.compile(r"=\s*([^=]*?)\b(" + "|".join(COLLECTIVES) + r")(?:-start)?\(")
_PAIRS = re.compile(r"source_target_pairs=\{((?:\{\d+,\d+\},?)*)\}")


def hlo_text(compiled: jax.stages.Compiled | str) -> str:
    """The HLO text of a compiled program (`jax.jit(f).lower(*a).compile()`), or the text itself."""
    # Compiled.as_text() is typed `str | None` (None where a backend has no text view).
    return compiled if isinstance(compiled, str) else compiled.as_text()  # type: ignore[return-value]


def collective_counts(compiled: jax.stages.Compiled | str) -> dict[str, int]:
    """How many of each collective a compiled program runs, keyed by the names in `COLLECTIVES`.

    A plain op, a `-start`/`-done` pair and an op wrapped in `async-start` each count once: the
    `-done` half is not matched, and a wrapped op is counted where it stands inside its async body
    (the `async-start` line itself only names that body).

    Args:
        compiled: a `jax.stages.Compiled` or its `as_text()`.
    """
    counts = dict.fromkeys(COLLECTIVES, 0)
    for line in hlo_text(compiled).splitlines():
        match = _OP.search(line)
        if match:
            counts[match.group(2)] += 1
    return counts


def collective_elements(compiled: jax.stages.Compiled | str) -> list[tuple[str, int]]:
    """Each collective of a compiled program with the values in the largest array it produces.

    One `(op, values)` per collective that `collective_counts` counts, in program order: `values`
    is the product of the dims of the largest array in the instruction's result type (a `-start`
    result is a tuple of the operand, the result and scalars, so its largest array counts). A
    program that moves data in small pieces shows only small numbers here; one that gathers or
    sums a whole operand at once shows that operand's size.

    Args:
        compiled: a `jax.stages.Compiled` or its `as_text()`.
    """
    found = []
    for line in hlo_text(compiled).splitlines():
        match = _OP.search(line)
        if match:
            found.append((match.group(2), _largest(match.group(1))))
    return found


def _largest(result_type: str) -> int:
    """The values of the largest array in an instruction's result type (a scalar holds one; none, 0)."""
    return max((math.prod(a.shape) for a in hlo_arrays.find_arrays(result_type)), default=0)


def permute_traffic(compiled: jax.stages.Compiled | str, n_devices: int) -> dict[int, int]:
    """How many values the collective-permutes of a compiled program send along each ring shift.

    A pair `{s,t}` of `source_target_pairs` sends from device s to device t: a shift of
    `(t - s) mod n_devices`. Each collective-permute adds the values of its largest array (as
    `collective_elements` counts them) to the shift of its pairs. A program that only passes to
    the right neighbour gives `{1: ...}`; one that passes both ways round the ring has
    `n_devices - 1` too. A permute inside a loop body is counted once, as it is written.

    Args:
        compiled: a `jax.stages.Compiled` or its `as_text()`.
        n_devices: the length of the ring (the devices of the mesh axis), >= 1.
    """
    checks.count("n_devices", n_devices)
    traffic: dict[int, int] = {}
    for line in hlo_text(compiled).splitlines():
        match = _OP.search(line)
        pairs = _PAIRS.search(line)
        if match and match.group(2) == "collective-permute" and pairs:
            values = _largest(match.group(1))
            shifts = {(int(t) - int(s)) % n_devices for s, t in re.findall(r"\{(\d+),(\d+)\}", pairs.group(1))}
            for shift in shifts:
                traffic[shift] = traffic.get(shift, 0) + values
    return traffic


def op_lines(compiled: jax.stages.Compiled | str, ops: tuple[str, ...] = COLLECTIVES, *, width: int = 110) -> str:
    """The instructions of a compiled program that run one of `ops`, one per line, for a reader.

    Each line is an HLO instruction `%name = type op(operands), attributes`, with its metadata
    (source file and line) removed and anything past `width` characters cut to `...`. The `-done`
    half of an asynchronous pair is left out, so each op appears once, as `collective_counts`
    counts it.

    Args:
        compiled: a `jax.stages.Compiled` or its `as_text()`.
        ops: HLO op names to show (default: the collectives), e.g. `("dot", "fusion")`.
        width: the longest line kept whole (characters, >= 20).
    """
    checks.count("width", width, minimum=20)
    if not ops or not all(isinstance(op, str) and op for op in ops):
        raise ValueError(f"ops={ops!r}: must be a non-empty tuple of HLO op names, e.g. {COLLECTIVES[:2]}")
    pattern = re.compile(r"=\s*[^=]*?\b(" + "|".join(map(re.escape, ops)) + r")(?:-start)?\(")
    shown = []
    for line in hlo_text(compiled).splitlines():
        if pattern.search(line):
            line = re.sub(r",\s*metadata=\{[^}]*\}", "", line.strip())
            shown.append(line if len(line) <= width else line[: width - 3] + "...")
    return "\n".join(shown)


def compile_on_cpu(
    fn: Callable[..., Any], *args: Any, static_argnums: int | tuple[int, ...] = ()
) -> jax.stages.Compiled:
    """`jax.jit(fn)` compiled for the host CPU, with float32 matmuls exact ("highest" precision).

    XLA's HLO and `cost_analysis()` depend on the backend, and an accelerator's default matmul
    precision (or `book_lib.precision`'s emulation of it) adds rounding ops to the program. A check
    of exact FLOP counts compiles here so that it tests the same program on every runtime.

    Args:
        fn: the function to compile.
        *args: its arguments; arrays are copied to the first CPU device.
        static_argnums: as for `jax.jit`.
    """
    import jax

    cpu = jax.devices("cpu")[0]
    static = {static_argnums} if isinstance(static_argnums, int) else set(static_argnums)
    placed = [a if i in static else jax.device_put(a, cpu) for i, a in enumerate(args)]
    with jax.default_matmul_precision("highest"):
        return jax.jit(fn, static_argnums=static_argnums).lower(*placed).compile()


@dataclass(frozen=True, slots=True, kw_only=True)
class Cost:
    """XLA's own estimate of a compiled program's work.

    Attributes:
        flops: floating-point operations XLA counts (FLOPs).
        bytes_accessed: bytes read and written, as XLA counts them (bytes).
    """

    flops: float
    bytes_accessed: float


def cost(compiled: jax.stages.Compiled) -> Cost:
    """`compiled.cost_analysis()` as a `Cost`, whether JAX returns a dict or a list of dicts."""
    raw = compiled.cost_analysis()
    parts = raw if isinstance(raw, (list, tuple)) else [raw]
    flops = sum(float(p.get("flops", 0.0)) for p in parts if p)
    accessed = sum(float(p.get("bytes accessed", 0.0)) for p in parts if p)
    return Cost(flops=flops, bytes_accessed=accessed)
