"""Speculative sampling's acceptance rules, in NumPy: which drafted tokens the target model keeps.

A cheap draft model proposes k tokens; one step of the target model scores all k + 1 positions at
once. Greedy decoding keeps the drafted tokens up to the first one that is not the target's argmax
and then adds the target's own token. Sampling keeps drafted token x with probability
min(1, p(x) / q(x)) (p the target's distribution, q the draft's); at the first rejection it draws
from the leftover max(0, p - q), renormalised, and stops. Either way every step yields between 1
and k + 1 tokens, and the tokens are distributed exactly as the target model alone would sample them.

Book: Part 7 (All About Transformer Inference), "Speculative Sampling"; Leviathan, Kalman and
Matias (2023), "Fast Inference from Transformers via Speculative Decoding", Algorithm 1.
"""

from __future__ import annotations

import numpy as np

from book_lib import checks

__all__ = ["accept_greedy", "accept_sampled", "acceptance_rate", "speculative_tokens_per_step"]


def _check(p: np.ndarray, drafted: np.ndarray, q: np.ndarray | None = None) -> None:
    k = len(drafted)
    if p.ndim != 2 or p.shape[0] != k + 1:
        raise ValueError(f"p.shape={p.shape!r}: need [k + 1, V] with k = {k} drafted tokens; allowed: 2-D, k + 1 rows")
    if q is not None and q.shape != (k, p.shape[1]):
        raise ValueError(f"q.shape={q.shape!r}: need [k, V] = {(k, p.shape[1])}; allowed: one row per drafted token")
    if np.any((drafted < 0) | (drafted >= p.shape[1])):
        raise ValueError(
            f"drafted={drafted.tolist()!r}: a token outside the vocabulary; allowed: 0 .. {p.shape[1] - 1}"
        )


def accept_greedy(target_logits: np.ndarray, drafted: np.ndarray) -> np.ndarray:
    """Tokens a greedy step emits: the drafted prefix the target agrees with, then the target's next token.

    Args:
        target_logits: [k + 1, V], the target's scores after the prompt and after each drafted token.
        drafted: [k] int tokens the draft model proposed.
    """
    logits, drafted = np.asarray(target_logits), np.asarray(drafted)
    _check(logits, drafted)
    best = logits.argmax(axis=-1)
    n = 0
    while n < len(drafted) and drafted[n] == best[n]:
        n += 1
    return np.append(drafted[:n], best[n]).astype(int)


def accept_sampled(p: np.ndarray, q: np.ndarray, drafted: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Tokens a sampling step emits, each distributed as the target alone would sample it.

    Drafted token i is kept with probability min(1, p_i(x) / q_i(x)); at the first rejection the
    step draws from norm(max(0, p_i - q_i)) and stops; if all k are kept it draws one more from p_k.

    Args:
        p: [k + 1, V] target probabilities; q: [k, V] draft probabilities the tokens were drawn from.
        drafted: [k] int tokens; rng: a NumPy Generator.
    """
    p, q, drafted = np.asarray(p, float), np.asarray(q, float), np.asarray(drafted)
    _check(p, drafted, q)
    kept: list[int] = []
    for i, x in enumerate(drafted):
        if rng.random() * q[i, x] < p[i, x]:  # u < p / q, without dividing by a zero q
            kept.append(int(x))
            continue
        leftover = np.maximum(p[i] - q[i], 0.0)
        return np.array([*kept, rng.choice(p.shape[1], p=leftover / leftover.sum())])
    return np.array([*kept, rng.choice(p.shape[1], p=p[-1] / p[-1].sum())])


def acceptance_rate(p: np.ndarray, q: np.ndarray) -> float:
    """Probability a drafted token is kept: sum over x of min(p(x), q(x)), for one position's p and q [V].

    It is 1 - (total variation distance between p and q); with it, `speculative_tokens_per_step`
    gives the expected tokens per step.
    """
    p, q = np.asarray(p, float), np.asarray(q, float)
    if p.shape != q.shape or p.ndim != 1:
        raise ValueError(f"q.shape={q.shape!r}: must equal p.shape={p.shape!r}, both [V]; allowed: equal 1-D shapes")
    return float(np.minimum(p, q).sum())


def speculative_tokens_per_step(*, acceptance_rate: float, draft_len: int) -> float:
    """Expected tokens a target-model step yields when it checks `draft_len` drafted tokens.

    Each drafted token is accepted with probability a, independently, until the first rejection;
    the target model always adds one token of its own (the correction, or one past the draft):
    E = (1 - a^(k+1)) / (1 - a), and k + 1 when a = 1.
    Book: Part 7, "Speculative Sampling"; Leviathan et al. (2023), equation (1).
    """
    a = checks.non_negative("acceptance_rate", acceptance_rate)
    if a > 1:
        raise ValueError(f"acceptance_rate={acceptance_rate!r}: not a probability; allowed: 0 <= a <= 1")
    k = checks.count("draft_len", draft_len, minimum=0)
    return float(k + 1) if a == 1 else (1 - a ** (k + 1)) / (1 - a)
