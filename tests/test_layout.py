"""book_lib.layout: tiling padding, memory spaces and HLO array types, checked against the text and by brute force."""

import itertools
import math
import subprocess
import sys

import numpy as np
import pytest

from book_lib import layout


def test_the_texts_f32_3x5_in_2x2_tiles():
    assert layout.padded_shape((3, 5), (2, 2)) == (4, 6)
    assert layout.padding_expansion((3, 5), (2, 2)) == pytest.approx(1.6, rel=1e-12)


@pytest.mark.parametrize(
    ("rows", "cols", "tr", "tc"), list(itertools.product((1, 3, 8, 13), (1, 5, 128, 130), (1, 2, 8), (1, 4, 128)))
)
def test_padding_matches_counting_the_tiles_that_cover_an_array(rows, cols, tr, tc):
    # Mark every element's tile on a grid of tiles: the cells of the tiles touched are what memory holds.
    touched = np.zeros((rows // tr + 2, cols // tc + 2), dtype=bool)
    for r, c in itertools.product(range(rows), range(cols)):
        touched[r // tr, c // tc] = True
    tiles_down, tiles_across = touched.any(axis=1).sum(), touched.any(axis=0).sum()
    assert layout.padded_shape((rows, cols), (tr, tc)) == (tiles_down * tr, tiles_across * tc)
    assert layout.padding_expansion((rows, cols), (tr, tc)) == pytest.approx(touched.sum() * tr * tc / (rows * cols))


def test_a_tile_covers_the_most_minor_dims_only():
    assert layout.padded_shape((3, 3, 5), (2, 2)) == (3, 4, 6)
    assert layout.padded_shape((32, 32, 4096), (8, 128)) == (32, 32, 4096)
    assert layout.padded_shape((7,), ()) == (7,)


@pytest.mark.parametrize(
    ("call", "start"),
    [
        (lambda: layout.padded_shape((3, 5), (2, 0)), r"^tile=0: not a count"),
        (lambda: layout.padded_shape((3, -1), (2, 2)), r"^shape=-1: not a count"),
        (lambda: layout.padded_shape((3, 5), (1, 2, 2)), r"^tile=\(1, 2, 2\): more dims"),
        (lambda: layout.padded_shape("35", (2, 2)), r"^shape='35': not a sequence"),
        (lambda: layout.padding_expansion((0, 5), (2, 2)), r"^shape=\(0, 5\): an empty array"),
        (lambda: layout.memory_space(-1), r"^code=-1: not a count"),
        (lambda: layout.parse_array("f32(3,5)"), r"^text='f32\(3,5\)': not an HLO array type"),
        (lambda: layout.parse_array("q7[3,5]"), r"^dtype='q7': unknown"),
        (lambda: layout.parse_array("f32[3,5]{1,1}"), r"^text='f32\[3,5\]\{1,1\}': layout"),
        (lambda: layout.parse_array("f32[3]{0:T(2,2)}"), r"^tile=\(2, 2\): more dims"),
    ],
)
def test_bad_input_names_the_argument(call, start):
    with pytest.raises(ValueError, match=start):
        call()


def test_memory_spaces_as_the_text_names_them():
    assert [layout.memory_space(c) for c in range(4)] == ["HBM", "VMEM", layout.OTHER_SPACE, layout.OTHER_SPACE]


def test_an_op_of_the_texts_form_reads_back():
    out = layout.parse_array("bf16[8,1024,2048]{2,1,0:T(8,128)(2,1)S(1)}")
    read = (out.dtype, out.shape, out.minor_to_major, out.tile, out.space)
    assert read == ("bf16", (8, 1024, 2048), (2, 1, 0), (8, 128), 1)
    assert out.memory == "VMEM" and out.bytes == out.padded_bytes == 2 * 8 * 1024 * 2048
    small = layout.parse_array("f32[3,5]{1,0:T(2,2)}")
    assert (small.bytes, small.padded_bytes, small.memory) == (60, 96, "HBM")


def test_a_column_major_layout_pads_the_other_dim():
    # {0,1}: dim 0 is minor, so memory holds [5, 3] and a (2, 4) tile pads it to [6, 4]
    a = layout.parse_array("f32[3,5]{0,1:T(2,4)}")
    assert a.memory_shape == (5, 3) and a.padded_bytes == 4 * math.prod(layout.padded_shape((5, 3), (2, 4))) == 96
    assert layout.parse_array("s8[4]").padded_bytes == 4


def test_layout_is_pure():
    code = "import sys, book_lib.layout; print('jax' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
