"""Tests for book_lib.sharding: the four matmul cases of Part 3, their collectives and times."""

import pytest

from book_lib.sharding import MatmulPlan, matmul_plan

W = 4.5e10  # v4 and v5e: one ICI link, one direction (bytes/s)


def test_case_1_needs_no_communication():
    plan = matmul_plan(
        "A[I_X, J]",
        "B[J, K_Y]",
        contracting="J",
        sizes={"I": 512, "J": 1024, "K": 2048},
        mesh={"X": 2, "Y": 4},
        chip="v5e",
    )
    assert isinstance(plan, MatmulPlan)
    assert plan.cases == (1,)
    assert str(plan.result) == "C[I_X, K_Y]"
    assert [s.op for s in plan.steps] == ["Matmul"]
    assert plan.comms_s == 0
    assert plan.matmul.flops == 2 * 256 * 1024 * 512


def test_case_2_gather_solution_3_4_strategy_1():
    # A[B, D] . W[D_X, F] with X = 16 on v5e (wrapped), B = 128, D = 8192, F = 32768, bf16.
    sizes, mesh = {"B": 128, "D": 8192, "F": 32768}, {"X": 16}
    plan = matmul_plan("A[B, D]", "W[D_X, F]", contracting="D", sizes=sizes, mesh=mesh, chip="v5e")
    assert plan.cases == (2,)
    gather, local = plan.steps
    assert gather.text == "AllGather_X W[D_X, F] -> W[D, F]"
    v = 2 * 8192 * 32768
    assert gather.time_s == pytest.approx(15 / 16 * v / (2 * W))  # 5.59 ms; printed rule 2DF / W_ici = 5.97 ms
    assert local.time_s == pytest.approx(2 * (128 * 8192 + 8192 * 32768 + 128 * 32768) / 8.1e11)  # HBM-bound
    assert str(plan.result) == "C[B, F]"
    assert plan.time_lower_s == pytest.approx(max(local.time_s, gather.time_s))
    assert plan.time_upper_s == pytest.approx(plan.matmul.t_upper + gather.time_s)


def test_case_3_all_reduce_solution_3_4_strategy_2():
    sizes, mesh = {"B": 128, "D": 8192, "F": 32768}, {"X": 16}
    plan = matmul_plan("A[B, D_X]", "W[D_X, F]", contracting="D", sizes=sizes, mesh=mesh, chip="v5e")
    assert plan.cases == (3,)
    assert [s.text for s in plan.steps] == [
        "A[B, D_X] ·_D W[D_X, F] -> C[B, F]{U_X}",
        "AllReduce_X C[B, F]{U_X} -> C[B, F]",
    ]
    v = 2 * 128 * 32768
    assert plan.comms_s == pytest.approx(2 * 15 / 16 * v / (2 * W))  # 175 us; printed rule 4BF / W_ici = 186 us
    assert plan.matmul.flops == 2 * 128 * (8192 / 16) * 32768


def test_case_3_exercise_3_6_on_v5e_4x4():
    # A[I_X, J_Y] ._J B[J_Y, K] on a v5e 4x4: no wraparounds, AllReduce over Y.
    sizes, mesh = {"I": 1024, "J": 8192, "K": 8192}, {"X": 4, "Y": 4}
    plan = matmul_plan(
        "A[I_X, J_Y]", "B[J_Y, K]", contracting="J", sizes=sizes, mesh=mesh, chip="v5e", wraparound=False
    )
    assert str(plan.result) == "C[I_X, K]"
    v = 2 * 1024 / 4 * 8192
    assert plan.comms_s == pytest.approx(2 * 3 / 4 * v / W)


def test_case_3_reduce_scatter():
    sizes, mesh = {"I": 1024, "J": 4096, "K": 8192}, {"X": 4}
    plan = matmul_plan(
        "A[I, J_X]", "B[J_X, K]", contracting="J", sizes=sizes, mesh=mesh, chip="v4", reduce="reduce_scatter",
        wraparound=True,
    )  # fmt: skip
    assert plan.steps[-1].text == "ReduceScatter_{X,K} C[I, K]{U_X} -> C[I, K_X]"
    assert plan.comms_s == pytest.approx(3 / 4 * 2 * 1024 * 8192 / (2 * W))
    physical = matmul_plan(
        "A[I, J_X]", "B[J_X, K]", contracting="J", sizes=sizes, mesh=mesh, chip="v4", reduce="reduce_scatter"
    )
    assert physical.comms_s == pytest.approx(2 * plan.comms_s), "a lone axis of 4 v4 chips is a line, not a ring"
    other = matmul_plan(
        "A[I, J_X]", "B[J_X, K]", contracting="J", sizes=sizes, mesh=mesh, chip="v4", reduce="reduce_scatter",
        scatter_dim="I",
    )  # fmt: skip
    assert str(other.result) == "C[I_X, K]"
    kept = matmul_plan("A[I, J_X]", "B[J_X, K]", contracting="J", sizes=sizes, mesh=mesh, chip="v4", reduce="none")
    assert str(kept.result) == "C[I, K]{U_X}" and kept.comms_s == 0


def test_case_3_over_two_axes():
    sizes, mesh = {"I": 1024, "J": 4096, "K": 8192}, {"X": 4, "Y": 4}
    plan = matmul_plan("A[I, J_XY]", "B[J_XY, K]", contracting="J", sizes=sizes, mesh=mesh, chip="v4", wraparound=True)
    assert plan.steps[-1].text == "AllReduce_XY C[I, K]{U_XY} -> C[I, K]"
    assert plan.comms_s == pytest.approx(2 * 15 / 16 * 2 * 1024 * 8192 / (4 * W))


def test_the_default_mesh_is_the_physical_slice():
    sizes = {"I": 1024, "J": 4096, "K": 8192}
    cube = {"X": 4, "Y": 4, "Z": 4}  # a whole v4 cube: every axis wraps
    plan = matmul_plan("A[I, J_X]", "B[J_X, K]", contracting="J", sizes=sizes, mesh=cube, chip="v4")
    assert plan.comms_s == pytest.approx(2 * 3 / 4 * 2 * 1024 * 8192 / (2 * W))
    line = matmul_plan("A[I, J_X]", "B[J_X, K]", contracting="J", sizes=sizes, mesh={"X": 64}, chip="v5e")
    assert line.comms_s == pytest.approx(2 * 63 / 64 * 2 * 1024 * 8192 / W), "64 v5e chips (an 8x8) hold no ring"
    with pytest.raises(ValueError, match=r"^mesh=\{'X': 512\}: 512 chips exceed one tpu-v5e pod"):
        matmul_plan("A[I, J_X]", "B[J_X, K]", contracting="J", sizes={"I": 512, "J": 512, "K": 512}, mesh={"X": 512},
                    chip="v5e")  # fmt: skip


def test_case_2_exercise_3_6_part_1():
    # A[I_X, J] ._J B[J_X, K_Y]: gather B over X, then multiply locally.
    sizes, mesh = {"I": 1024, "J": 8192, "K": 8192}, {"X": 4, "Y": 4}
    plan = matmul_plan(
        "A[I_X, J]", "B[J_X, K_Y]", contracting="J", sizes=sizes, mesh=mesh, chip="v5e", wraparound=False
    )
    assert plan.cases == (2,)
    assert plan.steps[0].text == "AllGather_X B[J_X, K_Y] -> B[J, K_Y]"
    assert plan.comms_s == pytest.approx(3 / 4 * 2 * 8192 * 8192 / 4 / W)
    assert str(plan.result) == "C[I_X, K_Y]"


def test_case_2_partial_overlap_keeps_shared_axes():
    sizes, mesh = {"I": 64, "J": 64, "K": 64}, {"X": 2, "Y": 2}
    plan = matmul_plan("A[I, J_XY]", "B[J_X, K]", contracting="J", sizes=sizes, mesh=mesh, chip="v5e")
    assert plan.cases == (2, 3)
    assert plan.steps[0].text == "AllGather_Y A[I, J_XY] -> A[I, J_X]"
    assert str(plan.result) == "C[I, K]"


def test_case_4_gathers_the_smaller_operand():
    mesh = {"X": 4}
    plan = matmul_plan(
        "A[I_X, J]", "B[J, K_X]", contracting="J", sizes={"I": 1024, "J": 4096, "K": 8192}, mesh=mesh, chip="v4",
        wraparound=True,
    )  # fmt: skip
    assert plan.cases == (4,)
    assert plan.steps[0].text == "AllGather_X A[I_X, J] -> A[I, J]"
    assert str(plan.result) == "C[I, K_X]"
    assert plan.comms_s == pytest.approx(3 / 4 * 2 * 1024 * 4096 / (2 * W))
    flipped = matmul_plan(
        "A[I_X, J]", "B[J, K_X]", contracting="J", sizes={"I": 8192, "J": 4096, "K": 1024}, mesh=mesh, chip="v4"
    )
    assert str(flipped.result) == "C[I_X, K]"


def test_contracting_pair_with_different_names():
    plan = matmul_plan(
        "A[I, J]",
        "B[L, K]",
        contracting=("J", "L"),
        sizes={"I": 8, "J": 16, "L": 16, "K": 8},
        mesh={"X": 1},
        chip="v5e",
    )
    assert str(plan.result) == "C[I, K]" and plan.cases == (1,)


def test_wraparound_per_axis():
    sizes, mesh = {"I": 1024, "J": 4096, "K": 8192}, {"X": 4, "Y": 16}
    ring = matmul_plan("A[I, J_Y]", "B[J_Y, K]", contracting="J", sizes=sizes, mesh=mesh, chip="v5e",
                       wraparound={"X": False, "Y": True})  # fmt: skip
    assert ring.comms_s == pytest.approx(2 * 15 / 16 * 2 * 1024 * 8192 / (2 * W))


SIZES, MESH = {"I": 64, "J": 64, "K": 64, "J2": 32}, {"X": 4, "Y": 4}


def test_error_contracting_missing():
    with pytest.raises(ValueError, match=r"^contracting='J': 'J' is not a dimension of rhs B\[L, K\]"):
        matmul_plan("A[I, J]", "B[L, K]", contracting="J", sizes={**SIZES, "L": 64}, mesh=MESH, chip="v5e")


def test_error_contracting_sizes_disagree():
    with pytest.raises(ValueError, match=r"^contracting=\('J', 'J2'\): sizes disagree"):
        matmul_plan("A[I, J]", "B[J2, K]", contracting=("J", "J2"), sizes=SIZES, mesh=MESH, chip="v5e")


def test_error_shared_non_contracting_dim():
    with pytest.raises(ValueError, match=r"^rhs='B\[J, I\]': non-contracting dimension 'I'"):
        matmul_plan("A[I, J]", "B[J, I]", contracting="J", sizes=SIZES, mesh=MESH, chip="v5e")


def test_error_unreduced_operand():
    with pytest.raises(ValueError, match=r"^lhs='A\[I, J\]\{U_X\}': holds partial sums"):
        matmul_plan("A[I, J]{U_X}", "B[J, K]", contracting="J", sizes=SIZES, mesh=MESH, chip="v5e")


def test_error_unknown_reduce():
    with pytest.raises(ValueError, match=r"^reduce='psum'"):
        matmul_plan("A[I, J_X]", "B[J_X, K]", contracting="J", sizes=SIZES, mesh=MESH, chip="v5e", reduce="psum")


def test_error_unknown_scatter_dim():
    with pytest.raises(ValueError, match=r"^scatter_dim='J'"):
        matmul_plan(
            "A[I, J_X]", "B[J_X, K]", contracting="J", sizes=SIZES, mesh=MESH, chip="v5e",
            reduce="reduce_scatter", scatter_dim="J",
        )  # fmt: skip


def test_error_wraparound_mapping_incomplete():
    with pytest.raises(ValueError, match=r"^wraparound=\{'X': True\}: no bool for mesh axis 'Y'"):
        matmul_plan("A[I, J]", "B[J, K]", contracting="J", sizes=SIZES, mesh=MESH, chip="v5e", wraparound={"X": True})


def test_error_unknown_chip_in_plan():
    with pytest.raises(ValueError, match=r"^chip='v9'"):
        matmul_plan("A[I, J]", "B[J, K]", contracting="J", sizes=SIZES, mesh=MESH, chip="v9")


def test_error_operand_not_divisible_in_plan():
    with pytest.raises(ValueError, match=r"^sizes\['I'\]=6: not divisible by 4"):
        matmul_plan("A[I_X, J]", "B[J, K]", contracting="J", sizes={**SIZES, "I": 6}, mesh=MESH, chip="v5e")
