"""book_lib.diagrams: the collective matmul's ring drawn as the schedule says, legibly, and as the program runs."""

import itertools
import subprocess
import sys

import matplotlib as mpl
import matplotlib.pyplot as plt
import pytest

from book_lib import collectives, diagrams

mpl.use("Agg")


def _patches(ax, prefix):
    return {p.get_gid(): p for p in ax.patches if (p.get_gid() or "").startswith(prefix)}


@pytest.mark.parametrize("n", [1, 2, 3, 4, diagrams.MAX_RING])
def test_one_box_per_device_and_step_and_one_arrow_per_send(n):
    fig, ax = diagrams.collective_matmul_ring(n)
    boxes, hops = _patches(ax, "chunk-"), _patches(ax, "hop-")
    assert len(boxes) == n * n
    assert len(hops) == n * collectives.permute_steps("all_gather", n), "n devices send at each of n - 1 hops"
    labels = {t.get_gid(): t.get_text() for t in ax.texts if t.get_gid()}
    chunks = collectives.ring_chunks(n)
    for s, d in itertools.product(range(n), range(n)):
        assert labels[f"chunk-{s}-{d}-label"] == f"chunk {chunks[s][d]}"
    for gid, arrow in hops.items():
        s, d = map(int, gid.split("-")[1:])
        end = arrow._posA_posB[1]  # where the arrow points (data units); matplotlib keeps no public getter
        target = next(b for b in boxes.values() if b.get_bbox().expanded(1.2, 1.2).contains(*end))
        assert labels[f"{target.get_gid()}-label"] == labels[f"chunk-{s}-{d}-label"], "a hop carries its chunk on"
        assert target.get_gid() == f"chunk-{s + 1}-{(d - 1) % n}", "to the left-hand neighbour"
    plt.close(fig)


def test_every_chunk_visits_every_device_once():
    for n in range(1, 9):
        chunks = collectives.ring_chunks(n)
        assert all(sorted(step[d] for step in chunks) == list(range(n)) for d in range(n))
        assert all(chunks[s + 1][d] == chunks[s][(d + 1) % n] for s in range(n - 1) for d in range(n))


def test_text_is_nine_points_or_more_and_no_label_overlaps_another():
    fig, ax = diagrams.collective_matmul_ring(4)
    renderer = fig.canvas.get_renderer()
    assert all(t.get_fontsize() >= 9 for t in ax.texts)
    boxes = [t.get_window_extent(renderer) for t in ax.texts]
    assert not [(a, b) for a, b in itertools.combinations(boxes, 2) if a.overlaps(b)]
    outside = [t.get_window_extent(renderer) for t in ax.texts if not (t.get_gid() or "").endswith("-label")]
    patches = [p.get_window_extent(renderer) for p in _patches(ax, "chunk-").values()]
    assert not [(a, b) for a in outside for b in patches if a.overlaps(b)], "step and device labels clear the boxes"
    plt.close(fig)


@pytest.mark.parametrize("n", [0, 2.5, diagrams.MAX_RING + 1])
def test_bad_ring_sizes_name_the_argument(n):
    with pytest.raises(ValueError, match=r"^n_devices="):
        diagrams.collective_matmul_ring(n)


def test_importing_diagrams_changes_no_matplotlib_setting():
    code = "import matplotlib as m; b = dict(m.rcParams); import book_lib.diagrams; print(dict(m.rcParams) == b)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "True"


def test_the_compiled_collective_matmul_sends_as_the_diagram_draws(eight_devices):
    import jax

    from book_lib import collective_matmul, devices, hlo

    n = devices.n_devices()
    a, w = jax.numpy.ones((8, 8 * n)), jax.numpy.ones((8 * n, 8 * n))
    program = jax.jit(collective_matmul.allgather_matmul).lower(a, w).compile()
    # ring_chunks: chunks[s + 1][d] = chunks[s][d + 1], so every send goes from device d + 1 to d
    assert set(hlo.permute_traffic(program, n)) == {(-1) % n}
    assert hlo.collective_counts(program)["collective-permute"] == len(collectives.ring_chunks(n)) - 1
