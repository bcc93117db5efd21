"""book_lib.legible finds small and overlapping text, and book_lib's figure functions run it."""

import matplotlib

matplotlib.use("agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from book_lib import diagrams, hardware, legible, models, plots  # noqa: E402


def _figure(width_in: float, *texts: tuple[float, float, str, float]):
    fig, ax = plt.subplots(figsize=(width_in, 3), dpi=100)
    for x, y, text, size in texts:
        ax.text(x, y, text, fontsize=size, transform=ax.transAxes)
    return fig


def test_a_figure_that_reads_passes():
    fig = _figure(6.5, (0.1, 0.8, "a label", 9), (0.1, 0.2, "another", 9))
    assert legible.problems(fig) == []
    plt.close(fig)


def test_text_shrunk_to_the_column_below_nine_pixels_is_found():
    # 7 pt at 100 dpi is 9.7 px; a 10-inch figure is shrunk to 684 / 1000 of that: 6.7 px
    fig = _figure(10.0, (0.1, 0.5, "tiny", 7))
    assert legible.shown_scale(fig) == pytest.approx(0.684)
    (problem,) = legible.problems(fig)
    assert problem.startswith("'tiny' is 6.7 px high")
    plt.close(fig)


def test_overlapping_labels_are_found_and_the_check_raises():
    fig = _figure(6.5, (0.40, 0.5, "first label", 10), (0.42, 0.5, "second label", 10))
    assert legible.problems(fig) == ["'first label' overlaps 'second label'"]
    with pytest.raises(ValueError, match="^fig: not legible in the book's column; 'first label' overlaps"):
        legible.check(fig)
    plt.close(fig)


def test_parallel_turned_labels_whose_boxes_overlap_do_not_count():
    fig, ax = plt.subplots(figsize=(6.5, 3), dpi=100)
    ax.set_xticks(range(12), [f"a long label {i}" for i in range(12)], rotation=30, ha="right")
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    first, second = (t.get_window_extent(renderer) for t in ax.get_xticklabels()[:2])
    assert first.overlaps(second), "their upright boxes overlap"
    assert legible.problems(fig) == [], "their turned outlines do not"
    ax.set_xticks(range(12), [f"a long label {i}" for i in range(12)], rotation=0)
    assert "'a long label 0' overlaps 'a long label 1'" in legible.problems(fig)
    plt.close(fig)


def test_the_figure_functions_check_what_they_draw(monkeypatch):
    monkeypatch.setenv(legible.CHECK_ENV_VAR, "1")
    fig, _ = plots.roofline(hardware.chip_names())  # ten ridge labels, stacked so none overlaps
    fig2, _ = diagrams.transformer_layer(models.get_model("llama-3-70b"))
    monkeypatch.setattr(legible, "problems", lambda fig: ["'x' overlaps 'y'"])
    with pytest.raises(ValueError, match="'x' overlaps 'y'"):
        plots.chip_rates(["tpu-v5e"])
    monkeypatch.setenv(legible.CHECK_ENV_VAR, "0")
    plots.chip_rates(["tpu-v5e"])
    plt.close("all")
