"""Tests for book_lib.notation: the book's sharding notation, local sizes and the collectives' rewrites."""

import pytest

from book_lib.notation import ShardedArray, check_mesh, parse, subscript


@pytest.mark.parametrize(
    "text",
    ["A[I_X, J]", "C[I, K]{U_Y}", "A[I_XY, J]", "A[I_X, J_Y]", "[A_X, B]", "W[D_{data,model}, F]{U_{pod}}", "x[]"],
)
def test_round_trip(text):
    assert str(parse(text)) == text
    assert parse(str(parse(text))) == parse(text)


def test_parse_fields():
    a = parse(" C [ I_XY , K ] { U_Z } ")
    assert a == ShardedArray(name="C", dims=("I", "K"), axes=(("X", "Y"), ()), unreduced=("Z",))
    assert parse("C[I, K]{U_X, U_Y}").unreduced == ("X", "Y")
    assert str(parse("C[I, K]{U_X, U_Y}")) == "C[I, K]{U_XY}"
    assert ShardedArray.parse("A[I_X, J]").sharded_axes == ("X",)
    assert parse("A[I_XY, J]").axes_of("I") == ("X", "Y")


def test_local_bytes_pop_quiz():
    # int8[128, 2048] as A[I_XY, J] on {X: 2, Y: 8, Z: 2}: 8 x 2048 per device, 512 KiB over all 32.
    a, sizes, mesh = parse("A[I_XY, J]"), {"I": 128, "J": 2048}, {"X": 2, "Y": 8, "Z": 2}
    assert a.local_shape(sizes, mesh) == (8, 2048)
    assert a.local_bytes(sizes, mesh, bytes_per_element=1) == 16384
    assert a.total_bytes(sizes, mesh, bytes_per_element=1) == 512 * 1024


def test_replication_ratio_solution_3_1():
    a, sizes, mesh = parse("A[I_X, J, K]"), {"I": 64, "J": 8, "K": 8}, {"X": 4, "Y": 8, "Z": 2}
    assert a.total_bytes(sizes, mesh) / a.global_bytes(sizes) == 16


def test_local_shapes_of_the_jax_snippet():
    # Part 3's JAX preview: an 8x2048 A split ('X', 'Y') and a 2048x8192 B split (None, 'Y') on a 4x2 mesh.
    mesh = {"X": 4, "Y": 2}
    assert parse("A[I_X, J_Y]").local_shape({"I": 8, "J": 2048}, mesh) == (2, 1024)
    assert parse("B[J, K_Y]").local_shape({"J": 2048, "K": 8192}, mesh) == (2048, 4096)


def test_notation_transforms():
    assert str(parse("A[I_XY, J]").all_gather("X")) == "A[I_Y, J]"
    assert str(parse("C[I_X, K]{U_YZ}").all_reduce("Y")) == "C[I_X, K]{U_Z}"
    assert str(parse("C[I, K]{U_X}").all_reduce()) == "C[I, K]"
    assert str(parse("C[I, K]{U_X}").reduce_scatter("X", dim="K")) == "C[I, K_X]"
    assert str(parse("A[I_X, J]").all_to_all("X", "J")) == "A[I, J_X]"


def test_owners_of_each_block_on_a_mesh():
    mesh = {"X": 2, "Y": 2}
    assert parse("A[I_X, J]").owners(mesh) == {(0, 0): ((0, 0), (0, 1)), (1, 0): ((1, 0), (1, 1))}
    assert parse("A[I_X, J_Y]").owners(mesh) == {(i, j): ((i, j),) for i in (0, 1) for j in (0, 1)}
    # a dimension cut by two axes numbers its blocks with the first as the slower digit, as JAX does
    assert parse("A[I_XY, J]").owners(mesh) == {(2 * x + y, 0): ((x, y),) for x in (0, 1) for y in (0, 1)}
    assert parse("A[I_YX, J]").owners(mesh)[(1, 0)] == ((1, 0),)
    assert parse("A[I, J]").owners({"X": 2}) == {(0, 0): ((0,), (1,))}
    sizes, mesh_3 = {"I": 8, "J": 8}, {"X": 2, "Y": 4, "Z": 2}
    for text in ("A[I_XY, J_Z]", "A[I_Z, J]", "C[I, J_X]{U_Y}"):
        a = parse(text)
        copies = a.total_bytes(sizes, mesh_3) / a.global_bytes(sizes)
        assert all(len(holders) == copies for holders in a.owners(mesh_3).values()), text
    with pytest.raises(ValueError, match=r"^mesh=\{'X': 2\}: no axis 'Y'"):
        parse("A[I_X, J_Y]").owners({"X": 2})


def test_subscript_and_mesh():
    assert subscript(("X", "Y")) == "XY" and subscript(("data", "model")) == "{data,model}"
    assert check_mesh({"X": 4}) == {"X": 4}
    with pytest.raises(ValueError, match=r"^axes=\['X'\]: not mesh axis names"):
        subscript(["X"])
    with pytest.raises(ValueError, match=r"^mesh=\{\}: not a mesh"):
        check_mesh({})


def test_error_parse_bad_text():
    with pytest.raises(ValueError, match=r"^text='A\(I, J\)'"):
        parse("A(I, J)")
    with pytest.raises(ValueError, match=r"^text='A\[I_1, J\]': cannot read dimension 'I_1'"):
        parse("A[I_1, J]")


def test_error_mesh_axis_used_twice():
    with pytest.raises(ValueError, match=r"^text='A\[I_X, J_X\]': mesh axis 'X' used twice"):
        parse("A[I_X, J_X]")
    with pytest.raises(ValueError, match=r"mesh axis 'Y' used twice"):
        ShardedArray(name="C", dims=("I",), axes=(("Y",),), unreduced=("Y",))


def test_error_dimension_twice():
    with pytest.raises(ValueError, match=r"^dims=\('I', 'I'\): dimension 'I' appears twice"):
        ShardedArray(dims=("I", "I"), axes=((), ()))


def test_error_not_divisible():
    with pytest.raises(ValueError, match=r"^sizes\['I'\]=100: not divisible by 8"):
        parse("A[I_XY, J]").local_shape({"I": 100, "J": 4}, {"X": 2, "Y": 4})


def test_error_unknown_mesh_axis():
    with pytest.raises(ValueError, match=r"^mesh=\{'X': 2\}: no axis 'Z'"):
        parse("A[I_Z, J]").local_shape({"I": 4, "J": 4}, {"X": 2})


def test_error_missing_size():
    with pytest.raises(ValueError, match=r"^sizes=\{'I': 4\}: no length for dimension 'J'"):
        parse("A[I, J]").global_bytes({"I": 4})


def test_error_bad_mesh_size():
    with pytest.raises(ValueError, match=r"^mesh\['X'\]=0"):
        parse("A[I_X]").local_shape({"I": 4}, {"X": 0})


def test_error_bytes_per_element():
    with pytest.raises(ValueError, match=r"^bytes_per_element=0"):
        parse("A[I]").local_bytes({"I": 4}, {"X": 1}, bytes_per_element=0)


def test_error_gather_axis_not_used():
    with pytest.raises(ValueError, match=r"^axes=\('Y',\): 'Y' splits no dimension"):
        parse("A[I_X]").all_gather("Y")


def test_error_reduce_axis_not_unreduced():
    with pytest.raises(ValueError, match=r"^axes=\('X',\): C\[I_X\] is not unreduced over 'X'"):
        parse("C[I_X]").all_reduce("X")


def test_error_unknown_dim():
    with pytest.raises(ValueError, match=r"^dim='K': not a dimension"):
        parse("A[I, J]").axes_of("K")
