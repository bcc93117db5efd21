"""The rules a JAX program must keep to earn its points: read from its StableHLO and its compiled HLO.

One home for them, used twice: the course's grader judges a submitted program by them
(`exercises/grading/programs.py`, on the program it compiles itself), and a student's `check("Q9")`
applies the same rules to their own function before handing it in (`book_lib.answer_check`). A
question's rules are plain data (`Rules`, one per input shape it is graded on); every text read is
the program's print with its quoted strings blanked, since names and source locations are the only
text a student chooses and they sit in quotes.

Book: Part 10 (Programming TPUs in JAX) and Part 9 (Profiling), "How to Read an XLA Op".
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from book_lib import collectives, hlo
from book_lib.hlo_arrays import tensor_shapes

__all__ = [
    "ALLOWED_CUSTOM_CALLS",
    "HOST_OPS",
    "OPS",
    "Op",
    "Rules",
    "stablehlo_ops",
    "has_primitive",
    "blank",
    "program_problem",
    "compiled_problem",
]

# Custom calls JAX itself emits to mark shardings and shard_map's manual regions; anything else
# (a host callback above all) is refused before the program runs.
ALLOWED_CUSTOM_CALLS = frozenset(
    {
        "Sharding",
        "SPMDFullToShardShape",
        "SPMDShardToFullShape",
        "xla.sdy.GlobalToLocalShape",
        "xla.sdy.LocalToGlobalShape",
        "xla.sdy.FuncResultSharding",
    }
)
# Operations that talk to the host: they would block the grader or carry data past it.
HOST_OPS = frozenset({"stablehlo.infeed", "stablehlo.outfeed", "stablehlo.send", "stablehlo.recv"})
# JAX primitives a question may require (`Rules.needs_primitives`) -> the StableHLO operations they lower to.
OPS = {
    "shard_map": (
        "sdy.manual_computation",
        "custom_call:SPMDFullToShardShape",
        "custom_call:xla.sdy.GlobalToLocalShape",
    ),
    **{names.primitive: (names.stablehlo,) for names in collectives.NAMES.values()},
    "dynamic_update_slice": ("stablehlo.dynamic_update_slice",),
}
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_OP_NAME = re.compile(r'^(?:%[\w#:.]+(?:\s*,\s*%[\w#:.]+)*\s*=\s*)?"?([a-z_]+\.[a-z_.]+)"?')


@dataclass(frozen=True, slots=True)
class Op:
    """One operation of a StableHLO module: its name, a custom call's target, and its line with strings blanked."""

    name: str
    target: str
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Rules:
    """What one JAX question asks of its program, for one input shape.

    Attributes:
        needs_primitives: JAX primitives the program must contain (`OPS`).
        max_elements: no array of the StableHLO may hold this many values or more (None: no limit).
        kernel_blocks: a tiled kernel's block shapes, the output's last: the program must loop, load
            blocks of the input shapes and multiply them into one of the output's, and no matmul in it
            may produce more values than that block.
        collectives: collective name -> (least, most) count in the compiled program (several devices).
        max_collective_elements: no collective may produce more values than this (None: no limit).
        permute_shifts: ring shifts (+1 right, -1 left) along each of which the collective-permutes send
            at least a quarter of their values.
    """

    needs_primitives: tuple[str, ...] = ()
    max_elements: int | None = None
    kernel_blocks: tuple[tuple[int, ...], ...] = ()
    collectives: dict[str, tuple[int, int]] = field(default_factory=dict)
    max_collective_elements: int | None = None
    permute_shifts: tuple[int, ...] = ()


def stablehlo_ops(module: str) -> list[Op]:
    """Every operation of a printed StableHLO module, one per line that starts one (locations skipped)."""
    ops = []
    for line in module.splitlines():
        stripped = line.strip()
        if stripped.startswith("#loc"):
            continue
        match = _OP_NAME.match(stripped)
        if not match:
            continue
        target = ""
        if match.group(1) == "stablehlo.custom_call":
            named = re.search(r"custom_call\s+@([\w.$-]+)", stripped) or re.search(
                r'call_target_name\s*=\s*"([^"]*)"', stripped
            )
            target = named.group(1) if named else "?"
        ops.append(Op(match.group(1), target, _STRING.sub('""', stripped)))
    return ops


def has_primitive(ops: list[Op], primitive: str) -> bool:
    """Whether `ops` hold an operation `primitive` lowers to (`OPS`; its own name where it has no entry)."""
    for wanted in OPS.get(primitive, (primitive,)):
        kind, _, target = wanted.partition(":")
        if any(
            op.name == kind or (target and op.name == "stablehlo.custom_call" and op.target == target) for op in ops
        ):
            return True
    return False


def blank(text: str) -> str:
    """`text` with every quoted string blanked."""
    return _STRING.sub('""', text)


def program_problem(rules: Rules, name: str, ops: list[Op]) -> str | None:
    """What breaks `rules` in a program's StableHLO `ops` (`stablehlo_ops`), or None; `name` is the function's.

    In order: a custom call outside `ALLOWED_CUSTOM_CALLS`, an operation that talks to the host, a
    required primitive missing, an array of `max_elements` values or more, a kernel without its blocks.
    """
    calls = sorted({op.target for op in ops if op.name == "stablehlo.custom_call"} - ALLOWED_CUSTOM_CALLS)
    if calls:
        what = f"{calls[0]!r} (a host callback or another custom call)"
        return f"{name}: the program calls {what}, which the grader does not run"
    talks = sorted({op.name for op in ops} & HOST_OPS)
    if talks:
        return f"{name}: the program talks to the host ({talks[0]}), which the grader does not run"
    for primitive in rules.needs_primitives:
        if not has_primitive(ops, primitive):
            return f"{name}: the program has no {primitive}"
    if rules.max_elements is not None:
        largest = max((math.prod(s) for op in ops for s in tensor_shapes(op.text)), default=0)
        if largest >= rules.max_elements:
            return f"{name}: the program holds an array of {largest} values, as large as the full score matrix"
    if rules.kernel_blocks:
        return _kernel_problem(rules, name, ops)
    return None


def _kernel_problem(rules: Rules, name: str, ops: list[Op]) -> str | None:
    """A grid of steps, each loading the asked blocks and multiplying them; no matmul larger than a block."""
    *inputs, out_block = (tuple(b) for b in rules.kernel_blocks)
    if not any(op.name == "stablehlo.while" for op in ops):
        return f"{name}: the program has no grid of steps (no loop)"
    loaded = {
        tensor_shapes(op.text)[-1] for op in ops if op.name == "stablehlo.dynamic_slice" and tensor_shapes(op.text)
    }
    missing = [b for b in inputs if b not in loaded]
    if missing:
        return f"{name}: no step loads a block of shape {missing[0]}"
    dots = [tensor_shapes(op.text) for op in ops if op.name == "stablehlo.dot_general"]
    for shapes in dots:
        if shapes and math.prod(shapes[-1]) > math.prod(out_block):
            return f"{name}: a matmul outside the kernel's blocks produces an array of shape {shapes[-1]}"
    if not any(shapes[-3:] == [*inputs, out_block] for shapes in dots):
        return f"{name}: no matmul multiplies a {inputs[0]} block by a {inputs[1]} block"
    return None


def compiled_problem(rules: Rules, name: str, hlo_text: str, n_devices: int) -> str | None:
    """What breaks `rules` in a program compiled for `n_devices` (its HLO text, strings blanked), or None:
    a collective count outside its bounds, a collective moving more than the asked pieces, too little
    of the collective-permutes' data sent each asked way round the ring."""
    counts = hlo.collective_counts(hlo_text)
    for op, (least, most) in rules.collectives.items():
        if not least <= counts[op] <= most:
            return f"{name}: the compiled program has {counts[op]} {op}"
    if rules.max_collective_elements is not None:
        for op, values in hlo.collective_elements(hlo_text):
            if values > rules.max_collective_elements:
                return f"{name}: one {op} moves an array of {values} values, more than the pieces the question asks for"
    traffic = hlo.permute_traffic(hlo_text, n_devices)
    for shift in rules.permute_shifts:
        # each asked direction carries a real share of the data, not a token permute beside the rest
        if traffic.get(shift % n_devices, 0) * 4 < sum(traffic.values()):
            side = "right (to device i + 1)" if shift > 0 else "left (to device i - 1)"
            return f"{name}: the collective-permutes send less than a quarter of their data to the {side}"
    return None
