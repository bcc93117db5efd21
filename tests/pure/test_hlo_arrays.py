"""book_lib.hlo_arrays: tiling padding, memory spaces and array types, checked against the text and by brute force."""

import itertools
import math
import subprocess
import sys

import numpy as np
import pytest

from book_lib import hlo_arrays


def test_the_texts_f32_3x5_in_2x2_tiles():
    assert hlo_arrays.padded_shape((3, 5), (2, 2)) == (4, 6)
    assert hlo_arrays.padding_expansion((3, 5), (2, 2)) == pytest.approx(1.6, rel=1e-12)


@pytest.mark.parametrize(
    ("rows", "cols", "tr", "tc"), list(itertools.product((1, 3, 8, 13), (1, 5, 128, 130), (1, 2, 8), (1, 4, 128)))
)
def test_padding_matches_counting_the_tiles_that_cover_an_array(rows, cols, tr, tc):
    # Mark every element's tile on a grid of tiles: the cells of the tiles touched are what memory holds.
    touched = np.zeros((rows // tr + 2, cols // tc + 2), dtype=bool)
    for r, c in itertools.product(range(rows), range(cols)):
        touched[r // tr, c // tc] = True
    tiles_down, tiles_across = touched.any(axis=1).sum(), touched.any(axis=0).sum()
    assert hlo_arrays.padded_shape((rows, cols), (tr, tc)) == (tiles_down * tr, tiles_across * tc)
    assert hlo_arrays.padding_expansion((rows, cols), (tr, tc)) == pytest.approx(
        touched.sum() * tr * tc / (rows * cols)
    )


def test_a_tile_covers_the_most_minor_dims_only():
    assert hlo_arrays.padded_shape((3, 3, 5), (2, 2)) == (3, 4, 6)
    assert hlo_arrays.padded_shape((32, 32, 4096), (8, 128)) == (32, 32, 4096)
    assert hlo_arrays.padded_shape((7,), ()) == (7,)


@pytest.mark.parametrize(
    ("call", "start"),
    [
        (lambda: hlo_arrays.padded_shape((3, 5), (2, 0)), r"^tile=0: not a count"),
        (lambda: hlo_arrays.padded_shape((3, -1), (2, 2)), r"^shape=-1: not a count"),
        (lambda: hlo_arrays.padded_shape((3, 5), (1, 2, 2)), r"^tile=\(1, 2, 2\): more dims"),
        (lambda: hlo_arrays.padded_shape("35", (2, 2)), r"^shape='35': not a sequence"),
        (lambda: hlo_arrays.padding_expansion((0, 5), (2, 2)), r"^shape=\(0, 5\): an empty array"),
        (lambda: hlo_arrays.memory_space(-1), r"^code=-1: not a count"),
        (lambda: hlo_arrays.parse_array("f32(3,5)"), r"^text='f32\(3,5\)': not an HLO array type"),
        (lambda: hlo_arrays.parse_array("q7[3,5]"), r"^dtype='q7': unknown"),
        (lambda: hlo_arrays.parse_array("f32[3,5]{1,1}"), r"^text='f32\[3,5\]\{1,1\}': layout"),
        (lambda: hlo_arrays.parse_array("f32[3]{0:T(2,2)}"), r"^tile=\(2, 2\): more dims"),
    ],
)
def test_bad_input_names_the_argument(call, start):
    with pytest.raises(ValueError, match=start):
        call()


def test_memory_spaces_as_the_text_names_them():
    assert [hlo_arrays.memory_space(c) for c in range(4)] == [
        "HBM",
        "VMEM",
        hlo_arrays.OTHER_SPACE,
        hlo_arrays.OTHER_SPACE,
    ]


def test_an_op_of_the_texts_form_reads_back():
    out = hlo_arrays.parse_array("bf16[8,1024,2048]{2,1,0:T(8,128)(2,1)S(1)}")
    read = (out.dtype, out.shape, out.minor_to_major, out.tile, out.space)
    assert read == ("bf16", (8, 1024, 2048), (2, 1, 0), (8, 128), 1)
    assert out.inner_tiles == ((2, 1),) and hlo_arrays.parse_array("f32[3,5]{1,0:T(2,2)}").inner_tiles == ()
    assert hlo_arrays.parse_array("bf16[8192]{0:T(1024)(128)(2,1)}").inner_tiles == ((128,), (2, 1))
    assert out.memory == "VMEM" and out.bytes == out.padded_bytes == 2 * 8 * 1024 * 2048
    small = hlo_arrays.parse_array("f32[3,5]{1,0:T(2,2)}")
    assert (small.bytes, small.padded_bytes, small.memory) == (60, 96, "HBM")


def test_a_column_major_layout_pads_the_other_dim():
    # {0,1}: dim 0 is minor, so memory holds [5, 3] and a (2, 4) tile pads it to [6, 4]
    a = hlo_arrays.parse_array("f32[3,5]{0,1:T(2,4)}")
    assert a.memory_shape == (5, 3) and a.padded_bytes == 4 * math.prod(hlo_arrays.padded_shape((5, 3), (2, 4))) == 96
    assert hlo_arrays.parse_array("s8[4]").padded_bytes == 4


def test_the_texts_bf16_4x8_packs_each_columns_two_rows_into_one_word():
    # bf16[4,8]{1,0:T(2,4)(2,1)}: four (2, 4) tiles in row-major order, each four (2, 1) pairs
    a = hlo_arrays.parse_array("bf16[4,8]{1,0:T(2,4)(2,1)}")
    tiles = (a.tile, *a.inner_tiles)
    grid = [[hlo_arrays.tiled_offset((r, c), a.memory_shape, tiles) for c in range(8)] for r in range(4)]
    assert grid[0][:4] == [0, 2, 4, 6] and grid[1][:4] == [1, 3, 5, 7], "down a column's pair, then across"
    assert grid[0][4] == 8 and grid[2][0] == 16, "the next tile across, then the next row of tiles"
    assert all(grid[1][c] == grid[0][c] + 1 for c in range(8)), "rows 0 and 1 of a column share a word"


def test_the_texts_f32_3x5_tiles_are_row_major_inside():
    grid = [[hlo_arrays.tiled_offset((r, c), (3, 5), ((2, 2),)) for c in range(5)] for r in range(3)]
    assert grid[0][:2] + grid[1][:2] == [0, 1, 2, 3] and grid[0][2] == 4
    assert hlo_arrays.tiled_offset((2, 4), (3, 5), ((2, 2),)) < 24, "inside the padded [4, 6]"


@pytest.mark.parametrize(("shape", "tiles"), [((3, 5), ((2, 2),)), ((5, 9), ((4, 4), (2, 1))), ((16,), ((8,), (2,)))])
def test_offsets_are_distinct_and_inner_tiles_add_no_padding(shape, tiles):
    cells = list(itertools.product(*map(range, shape)))
    nested = {hlo_arrays.tiled_offset(i, shape, tiles) for i in cells}
    outer = {hlo_arrays.tiled_offset(i, shape, tiles[:1]) for i in cells}
    assert len(nested) == len(cells), "one place per element"
    assert max(nested) < math.prod(hlo_arrays.padded_shape(shape, tiles[0])), "within the outer tiles' padding"
    assert nested <= set(range(math.prod(hlo_arrays.padded_shape(shape, tiles[0])))) and len(outer) == len(cells)
    assert hlo_arrays.tiled_offset((0,) * len(shape), shape, ()) == 0


@pytest.mark.parametrize(
    ("call", "start"),
    [
        (lambda: hlo_arrays.tiled_offset((4, 0), (4, 8), ((2, 4),)), r"^index=\(4, 0\): not inside"),
        (lambda: hlo_arrays.tiled_offset((0,), (4, 8), ((2, 4),)), r"^index=\(0,\): not inside"),
        (lambda: hlo_arrays.tiled_offset((0, 0), (4, 8), ((2, 0),)), r"^tile=0: not a count"),
        (lambda: hlo_arrays.tiled_offset((0,), (8,), ((2, 4),)), r"^tile=\(2, 4\): more dims"),
        (lambda: hlo_arrays.tiled_offset((0, 0), (4, 8), "T(2,4)"), r"^tiles='T\(2,4\)': not a sequence"),
    ],
)
def test_tiled_offset_refuses_bad_input(call, start):
    with pytest.raises(ValueError, match=start):
        call()


def test_layout_is_pure():
    code = "import sys, book_lib.hlo_arrays; print('jax' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_every_array_type_of_an_instruction_and_of_stablehlo():
    line = "%ag = (f32[4,16]{1,0:T(8,128)}, u32[], token[]) all-gather-start(f32[2,16]{1,0} %x)"
    found = hlo_arrays.find_arrays(line)
    assert [(a.dtype, a.shape) for a in found] == [("f32", (4, 16)), ("u32", ()), ("token", ()), ("f32", (2, 16))]
    assert found[0].tile == (8, 128) and found[3].minor_to_major == (1, 0)
    assert hlo_arrays.find_arrays("bf16[8]{0:T(1024)(128)(2,1)S(1)}")[0].memory == "VMEM"
    stablehlo = "%0 = stablehlo.dot_general %a, %b : (tensor<8x128xf32>, tensor<128x4xf32>) -> tensor<8x4xf32>"
    assert hlo_arrays.tensor_shapes(stablehlo) == [(8, 128), (128, 4), (8, 4)]
    assert hlo_arrays.tensor_shapes("tensor<f32>") == [()]
