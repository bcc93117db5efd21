"""Answer keys: for every autograded question, what the answer cell defines and how it is judged.

Keys are read by the grader's own process (`exercises/grading/`), never by the student's kernel:
the kernel only records what the student's names hold (a value; a function's outputs on inputs
drawn at grading time; a JAX function exported as a program) and the comparison with these keys
happens outside it, a JAX program compiled and run by the grader itself. `tests/course/test_exercises.py`
checks every key against the reference solution.

Each question's key is built by the constructor of its kind, which takes only what that kind uses:
`value` (numbers: a formula, the statement's numbers and a class's draw), `function` (a callable of
numbers: a reference and the text's inputs), `choice` (a string from a few) and `program` (a JAX
function: how it is probed and judged, `JaxCheck`). Helpers keep each key its formula: `preset_sizes`
and `sized_model` here (a model's sizes as a statement prints them), the chips a class may draw and
the text's own constants in `chips`, the JAX questions' arrays in `arrays`.
"""

from __future__ import annotations

import importlib
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from book_lib import models, program_rules, transformer

__all__ = [
    "Key",
    "JaxCheck",
    "value",
    "function",
    "choice",
    "program",
    "keys_for",
    "redraw",
    "draw_linked",
    "linked_groups",
    "pick",
    "scaled",
    "preset_sizes",
    "sized_model",
    "MAX_REDRAWS",
    "Rubric",
    "manual",
    "manual_for",
]

# Integer factors by which grading-time inputs scale the text's cases (see `scaled`).
DRAW_FACTORS = tuple(range(2, 10))
# Draws `redraw` tries before it gives up on a condition (the narrowest key needs a few dozen).
MAX_REDRAWS = 1000


SIZES = {
    "layers": "n_layers",
    "d": "d_model",
    "f": "d_ff",
    "n": "n_heads",
    "k": "n_kv_heads",
    "h": "head_dim",
    "v": "vocab_size",
}


def preset_sizes(preset: str) -> dict[str, int]:
    """A `book_lib.models` preset's sizes as a statement prints them: layers, d, f, n, k, h, v (`SIZES`)."""
    model = models.get_model(preset)
    return {short: getattr(model, name) for short, name in SIZES.items()}


def sized_model(layers: int, d: int, f: int, n: int, k: int, h: int, v: int, **more) -> transformer.TransformerConfig:
    """The model of a statement's sizes (`preset_sizes`), with any other `TransformerConfig` fields in `more`."""
    sizes = dict(zip(SIZES.values(), (layers, d, f, n, k, h, v), strict=True))
    return transformer.TransformerConfig(**sizes, **more)


def pick(*draws: Callable[[random.Random], dict], **options: tuple) -> Callable[[random.Random], dict]:
    """A class's draw, rng -> {param: value}: each of `draws` in turn, then one of each parameter's `options`."""

    def draw(rng: random.Random) -> dict:
        values = {}
        for part in draws:
            values.update(part(rng))
        return {**values, **{name: rng.choice(choices) for name, choices in options.items()}}

    return draw


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


def linked_groups(keys: dict[str, Key]) -> dict[str, dict[str, Key]]:
    """The questions with numbers of one assignment, in groups drawn together: the first question of
    each group (its root) -> its questions in order, each after the one it `follows`.

    Raises:
        ValueError: a question that follows one that is not an earlier question with numbers, or
            shares a parameter that one of the two lacks.
    """
    groups: dict[str, dict[str, Key]] = {}
    root_of: dict[str, str] = {}
    for gid, key in keys.items():
        if not key.params:
            continue
        if key.follows is None:
            root_of[gid] = gid
            groups[gid] = {gid: key}
            continue
        if key.follows not in root_of:
            raise ValueError(
                f"{gid}: follows={key.follows!r}; allowed: an earlier question of the same assignment with numbers"
            )
        base = keys[key.follows]
        missing = [n for n in key.shared_names(base) if n not in key.params or n not in base.params]
        if missing:
            raise ValueError(f"{gid}: shares={missing}, not a parameter of both it and {key.follows}")
        root_of[gid] = root_of[key.follows]
        groups[root_of[gid]][gid] = key
    return groups


def draw_linked(
    group: dict[str, Key], rng: random.Random, *, differs: Callable[[str, dict], bool] | None = None
) -> dict[str, dict]:
    """grade_id -> a class's values for a group of questions drawn together (`linked_groups`).

    In order, each question's `params` updated by its `draw(rng)` (where it has one), then the numbers
    it `shares` taken from the question it `follows`; the whole group is drawn again until every
    question's `accept`, and `differs(grade_id, values)` when given, holds. One question alone draws
    as `Key.drawn` always has: the same seed gives the same values.

    Raises:
        ValueError: no draw in `MAX_REDRAWS` met every condition; the message names the group.
    """
    refusals: list[str] = []

    def once(r: random.Random) -> dict[str, dict]:
        values: dict[str, dict] = {}
        for gid, key in group.items():
            mine = {**key.params, **(key.draw(r) if key.draw is not None else {})}
            if key.follows is not None:
                mine.update({name: values[key.follows][name] for name in key.shared_names(group[key.follows])})
            values[gid] = mine
        return values

    def holds(values: dict[str, dict]) -> bool:
        return all(
            _holds(group[gid].accept, mine, refusals) and (differs is None or differs(gid, mine))
            for gid, mine in values.items()
        )

    names = ", ".join(name for key in group.values() for name in key.names)
    return _first(once, holds, rng, tries=MAX_REDRAWS, what=f"the draw of {names}", why=refusals)


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
        recorder: what the function is exported for (`"sharded"`, the default: a 1-D mesh "X" of 8 devices,
            its inputs placed by `in_specs`; `"traced"`: one device); the grader runs it the same way.
        cases: the sizes each probe is built from (passed to `inputs`).
        inputs: (sizes, n_devices, seed) -> tuple of numpy arrays (float32) and static ints.
        in_specs: one PartitionSpec per array input, as tuples of axis names or None.
        reference: (inputs, n_devices) -> the expected global output (numpy).
        atol: absolute tolerance on the output, scaled by 1 + max|expected|.
        per_device: every device must hold the whole expected output (a replicated result).
        block: (sizes, n_devices) -> the shape of device 0's block of the output, or None.
        collectives: collective name -> (least, most) count in the compiled program, for n > 1.
        needs_primitives: JAX primitives the program must contain (`"shard_map"`, `"psum"`), found
            as the StableHLO operations they lower to (`book_lib.program_rules.OPS`).
        max_elements: (sizes) -> no array in the program's StableHLO may hold this many values or more.
        max_collective_elements: (sizes, n_devices) -> no collective of the compiled program may
            produce an array of more values than this (a program that moves data in pieces).
        permute_shifts: ring shifts (+1 to the right, -1 to the left) along each of which the
            compiled program's collective-permutes send at least a quarter of their values.
        kernel_blocks: block shapes of a tiled kernel, the output's block last: the program must loop
            (a grid), load blocks of the input shapes and multiply them into one of the output's; no
            `dot_general` in it may produce more values than the output block.
    """

    recorder: str = "sharded"
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

    def rules(self, sizes: tuple[int, ...], n_devices: int) -> program_rules.Rules:
        """The rules of the program graded on `sizes`, as plain data (`book_lib.program_rules`): what the
        grader holds the program to, and what a student's `check` applies before handing in."""
        return program_rules.Rules(
            needs_primitives=self.needs_primitives,
            max_elements=self.max_elements(sizes) if self.max_elements else None,
            kernel_blocks=self.kernel_blocks,
            collectives=dict(self.collectives),
            max_collective_elements=(
                self.max_collective_elements(sizes, n_devices) if self.max_collective_elements else None
            ),
            permute_shifts=self.permute_shifts,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Key:
    """One autograded question, as the constructor of its kind builds it (`value`, `function`, `choice`, `program`).

    Attributes:
        kind: `"value"`, `"function"`, `"choice"` or `"jax"`.
        names: the names the answer cell must define.
        rel_tol: the relative tolerance on every number (the statement says the same).
        expected: value: (**params) -> {name: number}; choice: (**params) -> the right string.
        also: other models the text itself uses: value: each (**params) -> {name: number};
            function: each (*args) -> result.
        params: the numbers a value or choice question's statement gives, as the text gives them.
        draw: (random.Random) -> {param: value}: a class's own numbers for this question.
        accept: {param: value} -> bool: the condition a class's numbers must meet.
        choices: the allowed strings of a choice.
        reference: function: (*args) -> the right result (a number or a tuple of numbers).
        cases: function: the inputs the text's problem uses; grading adds two drawn at random.
        check: how a JAX question is probed and judged.
        follows: the grade_id of an earlier question of the same assignment whose numbers this one
            takes up ("the model of Q1"): a class's draw takes the numbers it `shares` from that
            question's draw (`draw_linked`), so the two statements never disagree.
        shares: the parameters taken from `follows`; None: every parameter both questions have;
            `()`: none (the statement refers to the other question's method, not its numbers).
    """

    kind: str
    names: tuple[str, ...]
    rel_tol: float = 0.0
    expected: Callable[..., object] | None = None
    also: tuple[Callable[..., object], ...] = ()
    params: dict[str, int | float | str] = field(default_factory=dict)
    draw: Callable[[random.Random], dict] | None = None
    accept: Callable[[dict], bool] | None = None
    choices: tuple[str, ...] = ()
    reference: Callable[..., object] | None = None
    cases: tuple[tuple, ...] = ()
    check: JaxCheck | None = None
    follows: str | None = None
    shares: tuple[str, ...] | None = None

    def drawn(self, rng: random.Random, *, differs: Callable[[dict], bool] | None = None) -> dict:
        """A class's values: `params` updated by `draw(rng)`, drawn again until `accept` holds.

        `differs`, when given, must hold too (`exercises/variants.py` asks that every answer move
        from the text's); an error it raises is raised. At most `MAX_REDRAWS` draws; then a
        `ValueError` names the question. A question that `follows` another is drawn with it (`draw_linked`).
        """
        if self.draw is None or self.follows is not None:
            raise ValueError(
                f"draw={self.draw!r}, follows={self.follows!r}: {self.names} is not drawn alone; "
                "allowed: a key with its own draw that follows no other (else `draw_linked`)"
            )
        check = None if differs is None else lambda _gid, values: differs(values)
        return draw_linked({"": self}, rng, differs=check)[""]

    def shared_names(self, base: Key) -> tuple[str, ...]:
        """The parameters this question takes from `base`, the question it `follows`."""
        if self.shares is not None:
            return self.shares
        return tuple(name for name in self.params if name in base.params)

    def answer(self, values: dict | None = None):
        """The expected answer of a value or choice question, for `values` (the text's by default)."""
        return self.expected(**(self.params if values is None else values))

    def answers(self, values: dict | None = None) -> list[dict]:
        """Every accepted answer of a value question: `answer`, then one per model in `also`."""
        mine = self.params if values is None else values
        return [self.answer(values), *(model(**mine) for model in self.also)]

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


def value(
    names: str | tuple[str, ...],
    expected: Callable[..., object],
    *,
    params: dict[str, int | float | str],
    draw: Callable[[random.Random], dict] | None = None,
    accept: Callable[[dict], bool] | None = None,
    also: tuple[Callable[..., object], ...] = (),
    rel_tol: float = 0.01,
    follows: str | None = None,
    shares: tuple[str, ...] | None = None,
) -> Key:
    """A value question: the answer cell assigns a number to each of `names` (one name, or a tuple of them).

    Args:
        names: the name, or the names, the answer cell assigns.
        expected: (**params) -> the answer: its number for one name; for several, a tuple of numbers in
            the order of `names`.
        params: the numbers the statement gives, as the text gives them (name -> int, float or str):
            `expected` takes them as keywords and the source notebook's templates print them
            (`exercises/variants.py`).
        draw: (random.Random) -> {param: value}: a class's own numbers, plain choices; None only for a
            question that `follows` another and draws nothing of its own.
        accept: {param: value} -> bool: the condition a class's numbers must meet (a clear answer, a
            model that fits its chip); `Key.drawn` draws again until it holds, and a `ValueError` it
            raises refuses the values too.
        also: other models the text itself uses, each read as `expected`: an answer that matches one of
            them in every name is right too (the statement says so).
        rel_tol: the relative tolerance; the statement says it in the words of `build.TOLERANCE_WORDS`.
        follows, shares: the earlier question whose numbers this one takes up, and which (`Key.follows`).

    Raises:
        ValueError: a parameter that is not an int, float or str; no `draw` and no `follows`.
    """
    names = (names,) if isinstance(names, str) else tuple(names)
    answers = (_by_name(names, expected, "expected"), *(_by_name(names, m, f"also[{i}]") for i, m in enumerate(also)))
    numbers = _numbers(params, draw, accept, follows, shares)
    return Key(kind="value", names=names, rel_tol=rel_tol, expected=answers[0], also=answers[1:], **numbers)


def function(
    name: str,
    reference: Callable[..., object],
    cases: tuple[tuple, ...],
    *,
    also: tuple[Callable[..., object], ...] = (),
    rel_tol: float = 1e-6,
) -> Key:
    """A function question: the answer cell defines `name`, a function of numbers.

    Args:
        reference: (*args) -> the right result (a number or a tuple of numbers), from `book_lib`.
        cases: the inputs the text's problem uses; grading adds two that scale every size of one by the
            same integer (`Key.probes`), and a reference that refuses an input (`ValueError`) gets another.
        also: other models the text itself uses, each (*args) -> result: a function that follows one of
            them on every probe is right too.
        rel_tol: the relative tolerance; the statement says it in the words of `build.TOLERANCE_WORDS`.

    Raises:
        ValueError: no cases.
    """
    if not cases:
        raise ValueError(f"cases={cases!r}: {name} needs the text's inputs; allowed: a tuple of argument tuples")
    return Key(kind="function", names=(name,), rel_tol=rel_tol, reference=reference, cases=tuple(cases), also=also)


def choice(
    name: str,
    answer: str | Callable[..., str],
    choices: tuple[str, ...],
    *,
    params: dict[str, int | float | str] | None = None,
    draw: Callable[[random.Random], dict] | None = None,
    accept: Callable[[dict], bool] | None = None,
    follows: str | None = None,
    shares: tuple[str, ...] | None = None,
) -> Key:
    """A choice question: the answer cell assigns `name` one of `choices`.

    Args:
        answer: the right string; for a question with numbers, (**params) -> it.
        choices: the allowed strings, two or more.
        params, draw, accept, follows, shares: a question with numbers takes them as `value` does;
            the text's one question takes none.

    Raises:
        ValueError: fewer than two choices; `params` without `draw` or `follows`, or `draw`, `accept` or
            `follows` without `params`.
    """
    if len(choices) < 2:
        raise ValueError(f"choices={choices!r}: {name} needs two or more; allowed: a tuple of str")
    if params is None and (draw, accept, follows) != (None, None, None):
        raise ValueError(f"params=None: {name} draws numbers; allowed: the statement's params beside its draw")
    expected = (lambda: answer) if isinstance(answer, str) else answer
    numbers = {} if params is None else _numbers(params, draw, accept, follows, shares)
    return Key(kind="choice", names=(name,), expected=expected, choices=tuple(choices), **numbers)


def program(name: str, **check: object) -> Key:
    """A JAX question: the answer cell defines `name`, a function of JAX arrays judged as `check` says.

    `check` holds `JaxCheck`'s fields as keywords: how the function is exported and probed, its NumPy
    reference and what its compiled program must hold (`exercises/grading/programs.py`).
    """
    return Key(kind="jax", names=(name,), check=JaxCheck(**check))


def _by_name(names: tuple[str, ...], model: Callable[..., object], arg: str) -> Callable[..., dict]:
    """`model` (the argument `arg`) answering {name: number}: its number for one name, its tuple for several."""
    if len(names) == 1:
        return lambda **values: {names[0]: model(**values)}

    def answer(**values) -> dict:
        got = model(**values)
        if not isinstance(got, tuple) or len(got) != len(names):
            raise ValueError(
                f"{arg}={model.__name__} gave {type(got).__name__} for {names}; allowed: a tuple of {len(names)}"
            )
        return dict(zip(names, got, strict=True))

    return answer


def _numbers(
    params: dict, draw: Callable | None, accept: Callable | None, follows: str | None, shares: tuple[str, ...] | None
) -> dict:
    """The fields of a question with numbers, each parameter an int, float or str (what a template prints)."""
    if draw is None and follows is None:
        raise ValueError(
            f"draw=None: params {sorted(params)} need a class's draw; allowed: a callable of an rng, or `follows`"
        )
    for name, number in params.items():
        if type(number) not in (int, float, str):
            raise ValueError(f"params[{name!r}]={number!r}: allowed: an int, float or str")
    return {"params": dict(params), "draw": draw, "accept": accept, "follows": follows, "shares": shares}


def keys_for(assignment: str) -> dict[str, Key]:
    """The keys of one assignment (`"ch01_rooflines"`), by grade_id: its autograded questions."""
    return importlib.import_module(f"exercises.keys.{assignment}").KEYS


@dataclass(frozen=True, slots=True)
class Rubric:
    """A question graded by hand (nbgrader's manually graded answer, through `formgrade`): what earns its points.

    Attributes:
        criteria: (points, what earns them), in the order a grader reads them.
    """

    criteria: tuple[tuple[float, str], ...]

    def __post_init__(self) -> None:
        if not self.criteria or any(not points > 0 for points, _ in self.criteria):
            raise ValueError(f"criteria={self.criteria!r}: allowed: one or more (points > 0, criterion)")

    @property
    def points(self) -> float:
        """The question's points: the sum of its criteria's."""
        return sum(points for points, _ in self.criteria)

    def markdown(self) -> str:
        """The rubric as its statement shows it, a list of criteria with their points."""
        return "\n".join(f"- {points:g} pt{'' if points == 1 else 's'}: {what}" for points, what in self.criteria)


def manual(*criteria: tuple[float, str]) -> Rubric:
    """A question graded by hand: its rubric, (points, criterion) each. The statement prints it (`<% rubric %>`)."""
    return Rubric(tuple(criteria))


def manual_for(assignment: str) -> dict[str, Rubric]:
    """The questions of one assignment graded by hand, by grade_id (a keys module's `MANUAL`; most have none)."""
    return getattr(importlib.import_module(f"exercises.keys.{assignment}"), "MANUAL", {})
