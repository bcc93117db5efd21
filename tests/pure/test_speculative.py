"""book_lib.speculative: the acceptance rules keep the target's distribution and match the formula."""

import numpy as np
import pytest

from book_lib import speculative


def _probs(rng, k, v):
    x = rng.gamma(0.7, size=(k, v))
    return x / x.sum(axis=-1, keepdims=True)


def test_greedy_keeps_the_agreeing_prefix_and_adds_the_targets_token():
    logits = np.array([[0, 5, 1], [3, 0, 1], [0, 0, 9], [1, 2, 0]], float)  # argmax 1, 0, 2, 1
    assert speculative.accept_greedy(logits, np.array([1, 0, 2])).tolist() == [1, 0, 2, 1]
    assert speculative.accept_greedy(logits, np.array([1, 2, 2])).tolist() == [1, 0]
    assert speculative.accept_greedy(logits, np.array([0, 0, 2])).tolist() == [1]


@pytest.mark.slow
def test_sampled_tokens_follow_the_target_distribution():
    rng = np.random.default_rng(0)
    v, trials = 5, 60_000
    p, q = _probs(rng, 2, v), _probs(rng, 1, v)
    first = np.zeros(v)
    for _ in range(trials):
        drafted = np.array([rng.choice(v, p=q[0])])
        first[speculative.accept_sampled(p, q, drafted, rng)[0]] += 1
    np.testing.assert_allclose(first / trials, p[0], atol=0.01)
    assert np.abs(first / trials - q[0]).max() > 0.05  # the draft's own distribution would fail


def test_tokens_per_step_match_the_formula():
    rng = np.random.default_rng(1)
    v, k, trials = 6, 4, 20_000
    one_p, one_q = _probs(rng, 1, v)[0], _probs(rng, 1, v)[0]
    p, q = np.tile(one_p, (k + 1, 1)), np.tile(one_q, (k, 1))
    total = sum(len(speculative.accept_sampled(p, q, rng.choice(v, size=k, p=one_q), rng)) for _ in range(trials))
    rate = speculative.acceptance_rate(one_p, one_q)
    assert 0.2 < rate < 0.95
    assert total / trials == pytest.approx(
        speculative.speculative_tokens_per_step(acceptance_rate=rate, draft_len=k), rel=0.02
    )


def test_a_perfect_draft_is_always_kept():
    rng = np.random.default_rng(2)
    p = _probs(rng, 4, 7)
    drafted = np.array([rng.choice(7, p=row) for row in p[:3]])
    assert len(speculative.accept_sampled(p, p[:3], drafted, rng)) == 4
    assert speculative.acceptance_rate(p[0], p[0]) == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: speculative.accept_greedy(np.zeros((2, 4)), np.array([1, 2])), r"p.shape=\(2, 4\)"),
        (lambda: speculative.accept_greedy(np.zeros((3, 4)), np.array([1, 9])), r"drafted=\[1, 9\]"),
        (
            lambda: speculative.accept_sampled(np.ones((3, 4)), np.ones((3, 4)), np.array([1, 2]), None),
            r"q.shape=\(3, 4\)",
        ),
        (lambda: speculative.acceptance_rate(np.ones(3), np.ones(4)), r"q.shape=\(4,\)"),
    ],
)
def test_bad_input_is_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()
