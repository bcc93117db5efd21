"""Answer keys: for every autograded question, what the answer cell defines and how it is judged.

Keys are read by the grader's own process (`exercises/grading/`), never by the student's kernel:
the kernel only records what the student's names hold (a value; a function's outputs on inputs
drawn at grading time; a JAX function exported as a program) and the comparison with these keys
happens outside it, a JAX program compiled and run by the grader itself. `tests/course/test_exercises.py`
checks every key against the reference solution.
"""

from __future__ import annotations

import importlib
import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from book_lib import hardware

__all__ = ["Key", "JaxCheck", "keys_for", "redraw", "scaled", "text_chip", "KINDS", "MAX_REDRAWS"]

KINDS = ("value", "function", "choice", "jax")
# Integer factors by which grading-time inputs scale the text's cases (see `scaled`).
DRAW_FACTORS = tuple(range(2, 10))
# Draws `redraw` tries before it gives up on a condition (the narrowest key needs a few dozen).
MAX_REDRAWS = 1000


def text_chip(name: str) -> hardware.Chip:
    """`name`'s chip with its HBM as the text prints it: GB of 1e9 bytes where the table holds whole GiB.

    The text's tables write "16GB" for a v5e and "96GB" for a v5p; `book_lib.hardware` holds 16 and 96
    GiB (what the chips have and JAX reports). A question graded on the text's model accepts the answer
    either gives (`Key.also`). Other chips come back unchanged.
    """
    chip = hardware.get_chip(name)
    gib = chip.hbm_bytes / 2**30
    if gib != round(gib):
        return chip
    return replace(chip, name=f"{chip.name} (the text's HBM)", hbm_bytes=round(gib) * 1e9)


def redraw(
    draw: Callable[[random.Random], dict],
    accept: Callable[[dict], bool] | None,
    rng: random.Random,
    *,
    tries: int = MAX_REDRAWS,
    what: str = "draw",
) -> dict:
    """`draw(rng)`, drawn again until `accept` takes its values; at most `tries` draws.

    A condition that raises `ValueError` (a model refusing the values: a slice that cannot hold
    them, say) refuses the draw. Each try calls `draw` once, so a seed gives the same values
    whether a condition is checked here or inside the draw.

    Raises:
        ValueError: no draw in `tries` was accepted; the message names `what` and the last refusal.
    """
    refusals: list[str] = []
    return _first(draw, lambda values: _holds(accept, values, refusals), rng, tries=tries, what=what, why=refusals)


def _holds(accept: Callable[[dict], bool] | None, values: dict, refusals: list[str]) -> bool:
    """`accept(values)`; False where it raises `ValueError`, whose message joins `refusals`."""
    try:
        return accept is None or bool(accept(values))
    except ValueError as err:
        refusals.append(str(err))
        return False


def _first(
    draw: Callable, condition: Callable[[dict], bool], rng: random.Random, *, tries: int, what: str, why: list[str]
) -> dict:
    for _ in range(tries):
        values = draw(rng)
        if condition(values):
            return values
    last = f" (the last refusal: {why[-1]})" if why else ""
    raise ValueError(f"{what}: no draw in {tries} met its condition{last}; allowed: a draw whose values it accepts")


def scaled(args: tuple, factor: int) -> tuple:
    """`args` with every int (not bool) multiplied by `factor`, inside nested tuples too.

    Scaling every size by the same factor keeps the relations a statement may rely on (one size
    dividing another, an even count, a coordinate inside a shape) while changing every value.
    """
    out = []
    for a in args:
        if isinstance(a, tuple):
            out.append(scaled(a, factor))
        elif isinstance(a, int) and not isinstance(a, bool):
            out.append(a * factor)
        else:
            out.append(a)
    return tuple(out)


@dataclass(frozen=True, slots=True, kw_only=True)
class JaxCheck:
    """How a JAX question is exported in the kernel and judged in the grader (`exercises/grading/programs.py`).

    Attributes:
        recorder: what the function is exported for (`"sharded"`: a 1-D mesh "X" of 8 devices, its
            inputs placed by `in_specs`; `"traced"`: one device); the grader runs it the same way.
        cases: the sizes each probe is built from (passed to `inputs`).
        inputs: (sizes, n_devices, seed) -> tuple of numpy arrays (float32) and static ints.
        in_specs: one PartitionSpec per array input, as tuples of axis names or None.
        reference: (inputs, n_devices) -> the expected global output (numpy).
        atol: absolute tolerance on the output, scaled by 1 + max|expected|.
        per_device: every device must hold the whole expected output (a replicated result).
        block: (sizes, n_devices) -> the shape of device 0's block of the output, or None.
        collectives: collective name -> (least, most) count in the compiled program, for n > 1.
        needs_primitives: JAX primitives the program must contain (`"shard_map"`, `"psum"`), found
            as the StableHLO operations they lower to (`programs.OPS`).
        max_elements: (sizes) -> no array in the program's StableHLO may hold this many values or more.
        max_collective_elements: (sizes, n_devices) -> no collective of the compiled program may
            produce an array of more values than this (a program that moves data in pieces).
        permute_shifts: ring shifts (+1 to the right, -1 to the left) along each of which the
            compiled program's collective-permutes send at least a quarter of their values.
        kernel_blocks: block shapes of a tiled kernel, the output's block last: the program must loop
            (a grid), load blocks of the input shapes and multiply them into one of the output's; no
            `dot_general` in it may produce more values than the output block.
    """

    recorder: str
    cases: tuple[tuple[int, ...], ...]
    inputs: Callable[..., tuple]
    in_specs: tuple = ()
    reference: Callable[..., object]
    atol: float = 0.0
    per_device: bool = False
    block: Callable[..., tuple[int, ...]] | None = None
    collectives: dict[str, tuple[int, int]] = field(default_factory=dict)
    needs_primitives: tuple[str, ...] = ()
    max_elements: Callable[..., int] | None = None
    max_collective_elements: Callable[..., int] | None = None
    permute_shifts: tuple[int, ...] = ()
    kernel_blocks: tuple[tuple[int, ...], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Key:
    """One autograded question.

    Attributes:
        names: the names the answer cell must define.
        kind: `"value"` (numbers), `"function"` (a callable of numbers), `"choice"` (a string from
            `choices`) or `"jax"` (a callable of JAX arrays, judged by `check`).
        expected: value: (**params) -> {name: number}; choice: (**params) -> the right string.
        reference: function: (*args) -> the right result (a number or a tuple of numbers).
        cases: function: the inputs the text's problem uses; grading adds two drawn at random.
        rel_tol: relative tolerance on every number (the statement says the same).
        choices: the allowed strings of a choice.
        check: how a JAX question is probed and judged.
        params: the numbers a value or choice question's statement gives, as the text gives them
            (name -> int, float or str); `expected` takes them as keywords, and the templates of
            the source notebook print them (`exercises/variants.py`).
        draw: (random.Random) -> {param: value}: a class's own numbers for this question.
        accept: {param: value} -> bool: the condition a class's numbers must meet (a clear answer, a
            model that fits its chip); `drawn` draws again until it holds, and a `ValueError` it
            raises refuses the values too. The draw itself stays a plain choice of numbers.
        also: other models the text itself uses; an answer that matches one of them is right too (the
            statement says so). Value questions: each (**params) -> {name: number}, matched in every
            name. Function questions: each (*args) -> result, matched on every probe (one model for all).
    """

    names: tuple[str, ...]
    kind: str
    expected: Callable[[], object] | None = None
    reference: Callable[..., object] | None = None
    cases: tuple[tuple, ...] = ()
    rel_tol: float | None = None
    choices: tuple[str, ...] = ()
    check: JaxCheck | None = None
    params: dict[str, int | float | str] = field(default_factory=dict)
    draw: Callable[[random.Random], dict] | None = None
    accept: Callable[[dict], bool] | None = None
    also: tuple[Callable[..., dict], ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind={self.kind!r}: unknown; allowed: {', '.join(map(repr, KINDS))}")
        needs = {"value": "expected", "choice": "expected", "function": "reference", "jax": "check"}[self.kind]
        if getattr(self, needs) is None:
            raise ValueError(f"{needs}=None: a {self.kind!r} key needs one; allowed: a callable")
        if self.kind == "function" and not self.cases:
            raise ValueError("cases=(): a function key needs the text's inputs; allowed: a tuple of argument tuples")
        if self.kind == "choice" and len(self.choices) < 2:
            raise ValueError(f"choices={self.choices!r}: a choice needs two or more; allowed: a tuple of str")
        if bool(self.params) != (self.draw is not None):
            raise ValueError(f"params={self.params!r}, draw={self.draw!r}: give both or neither")
        if self.accept is not None and self.draw is None:
            raise ValueError(f"accept={self.accept!r}: a condition on drawn values needs a draw; allowed: None")
        if self.also and self.kind not in ("value", "function"):
            raise ValueError(f"also={self.also!r}: only value and function questions take other models; allowed: ()")
        if self.params and self.kind not in ("value", "choice"):
            raise ValueError(f"params={self.params!r}: only value and choice questions take parameters")
        for name, value in self.params.items():
            if type(value) not in (int, float, str):
                raise ValueError(f"params[{name!r}]={value!r}: allowed: an int, float or str")

    def drawn(self, rng: random.Random, *, differs: Callable[[dict], bool] | None = None) -> dict:
        """A class's values: `params` updated by `draw(rng)`, drawn again until `accept` holds.

        `differs`, when given, must hold too (`exercises/variants.py` asks that every answer move
        from the text's); an error it raises is raised. At most `MAX_REDRAWS` draws; then a
        `ValueError` names the question.
        """
        draw, refusals = self.draw, []
        if draw is None:
            raise ValueError(f"draw=None: {self.names} has no numbers to draw; allowed: a key with params")
        return _first(
            lambda r: {**self.params, **draw(r)},
            lambda values: _holds(self.accept, values, refusals) and (differs is None or differs(values)),
            rng,
            tries=MAX_REDRAWS,
            what=f"the draw of {', '.join(self.names)}",
            why=refusals,
        )

    def answer(self, values: dict | None = None):
        """The expected answer of a value or choice question, for `values` (the text's by default)."""
        return self.expected(**(self.params if values is None else values))

    def answers(self, values: dict | None = None) -> list[dict]:
        """Every accepted answer of a value question: `answer`, then one per model in `also`."""
        mine = self.params if values is None else values
        return [self.answer(values), *(model(**mine) for model in self.also)]

    @property
    def tolerance(self) -> float:
        """The relative tolerance in force: `rel_tol`, else 1 % for values and 1e-6 for functions."""
        if self.rel_tol is not None:
            return self.rel_tol
        return 0.01 if self.kind == "value" else 1e-6

    def probes(self, rng: random.Random, n_drawn: int = 2) -> list[tuple]:
        """The inputs a function is graded on: the text's cases, then `n_drawn` drawn with `rng`.

        A drawn input scales one case by a factor from `DRAW_FACTORS`; one the reference refuses
        (a ring longer than a pod, say) is drawn again.
        """
        drawn: list[tuple] = []
        for _ in range(50 * n_drawn):
            if len(drawn) == n_drawn:
                break
            args = scaled(rng.choice(self.cases), rng.choice(DRAW_FACTORS))
            if self._accepts(args):
                drawn.append(args)
        return [tuple(c) for c in self.cases] + drawn

    def all_probes(self) -> list[tuple]:
        """Every input `probes` can produce (for tests that prove the reference on all of them)."""
        drawn = [scaled(c, f) for c in self.cases for f in DRAW_FACTORS]
        return [tuple(c) for c in self.cases] + [args for args in drawn if self._accepts(args)]

    def _accepts(self, args: tuple) -> bool:
        try:
            self.reference(*args)
        except ValueError:
            return False
        return True


def keys_for(assignment: str) -> dict[str, Key]:
    """The keys of one assignment (`"ch01_rooflines"`), by grade_id."""
    return importlib.import_module(f"exercises.keys.{assignment}").KEYS
