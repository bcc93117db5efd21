"""book_lib.kernels and book_lib.tiling: the Pallas matmul and flash attention equal jnp, in both kernel forms;
block sizes and their cost."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from book_lib import attention, hardware, kernels, roofline, tiling

pytestmark = pytest.mark.usefixtures("eight_devices")


def _normal(seed, shape, dtype=jnp.float32):
    return jax.random.normal(jax.random.key(seed), shape, dtype=dtype)


def _close(out, ref, dtype, k):
    r = tiling.tolerance(dtype, k)
    ref = np.asarray(ref, np.float32)
    np.testing.assert_allclose(np.asarray(out, np.float32), ref, rtol=r, atol=r * np.abs(ref).max())


@pytest.mark.slow
@pytest.mark.parametrize("style", ["grid", "loop"])
def test_matmul_equals_jnp_in_both_forms(style):
    x, y = _normal(0, (256, 384)), _normal(1, (384, 256))
    with jax.default_matmul_precision("highest"):
        out = kernels._pallas_matmul(x, y, tiling.BlockSizes(block_m=128, block_n=128, block_k=128), style, True)
        _close(out, x @ y, "float32", 384)


@pytest.mark.slow
def test_matmul_public_api_bf16_and_a_wrong_kernel_fails():
    x, y = _normal(2, (256, 256), jnp.bfloat16), _normal(3, (256, 256), jnp.bfloat16)
    out = kernels.matmul(x, y, block_sizes=tiling.BlockSizes(block_m=128, block_n=128, block_k=128))
    assert out.dtype == jnp.bfloat16 and out.shape == (256, 256)
    _close(out, jnp.dot(x, y, preferred_element_type=jnp.float32), "bf16", 256)
    # blocks given for a size no aligned tile divides (200 = 25 x 8): no derivation needed
    odd = kernels.matmul(x[:200, :], y, block_sizes=tiling.BlockSizes(block_m=8, block_n=128, block_k=256))
    _close(odd, jnp.dot(x[:200], y, preferred_element_type=jnp.float32), "bf16", 256)
    # jitted, as JAX's own Pallas ops are; blocks left out come from tiling.block_sizes
    assert hasattr(kernels.matmul, "lower") and hasattr(kernels.flash_attention, "lower")
    _close(kernels.matmul(x, y), jnp.dot(x, y, preferred_element_type=jnp.float32), "bf16", 256)
    # one contraction block dropped is far outside the tolerance
    with pytest.raises(AssertionError):
        _close(out, jnp.dot(x[:, :128], y[:128], preferred_element_type=jnp.float32), "bf16", 256)


@pytest.mark.slow
@pytest.mark.parametrize(("style", "causal"), [("grid", False), ("grid", True), ("loop", True)])
def test_flash_attention_equals_naive(style, causal):
    q, k, v = _normal(4, (128, 64)), _normal(5, (256, 64)), _normal(6, (256, 64))
    with jax.default_matmul_precision("highest"):
        out = kernels._pallas_flash(q, k, v, tiling.FlashBlockSizes(block_q=64, block_k=64), causal, style, True)
        ref = attention.naive_attention(q, k, v, causal=causal)
        _close(out, ref, "float32", 256)
        if causal:  # the mask matters: the non-causal answer is far off
            with pytest.raises(AssertionError):
                _close(out, attention.naive_attention(q, k, v), "float32", 256)


@pytest.mark.slow
def test_flash_attention_public_api_under_vmap():
    qkv = _normal(7, (2, 128, 64))  # two heads, self-attention

    def kernel(x):
        return kernels.flash_attention(x, x, x, causal=True)

    def naive(x):
        return attention.naive_attention(x, x, x, causal=True)

    with jax.default_matmul_precision("highest"):
        _close(jax.vmap(kernel)(qkv), jax.vmap(naive)(qkv), "float32", 128)


def test_backend_says_interpreted_on_cpu():
    how = kernels.backend()
    assert how.platform != "cpu" or (how.interpret and "interpret=True" in how.describe())


def test_block_sizes_follow_the_chip():
    v5e = tiling.block_sizes("v5e", 4096, 4096, 4096, "bf16")
    assert v5e == tiling.BlockSizes(block_m=512, block_n=512, block_k=512)  # 4 x the 128 MXU, 4 MiB of 128 MiB
    v5e_cost = tiling.tile_cost("v5e", v5e, 4096, "bf16")
    assert v5e_cost.footprint_bytes == 2 * (2 * 512 * 512) * 2 + 2 * 512 * 512 * 2 + 4 * 512 * 512
    assert v5e_cost.intensity_flops_per_byte == roofline.matmul_cost(512, 4096, 512).intensity
    assert v5e_cost.critical_flops_per_byte == roofline.critical_intensity("v5e")
    v6e = tiling.block_sizes("v6e", 4096, 4096, 4096, "bf16")
    v6e_cost = tiling.tile_cost("v6e", v6e, 4096, "bf16")
    # a 256 MXU allows 1024 sides; no published VMEM, so the 16 MiB floor halves one of them
    assert (v6e.block_m, v6e.block_n, v6e_cost.budget_bytes) == (1024, 512, tiling.SCOPED_VMEM_BYTES)
    assert v5e_cost.compute_bound is False and v6e_cost.compute_bound is False  # 241 < 243 and 315 < 575 FLOPs/byte
    h100 = tiling.block_sizes("h100", 4096, 4096, 4096, "bf16")
    smem = hardware.get_chip("h100").shared_memory_bytes_per_sm
    assert (h100.block_m, h100.block_n) == (128, 128)
    assert tiling.tile_cost("h100", h100, 4096, "bf16").footprint_bytes <= smem // 2
    assert tiling.block_sizes(None, 64, 256, 384).block_m == 64  # a small size is one tile
    assert tiling.block_sizes(None, 256, 256, 384).block_k == 128  # 384 = 3 x 128: only 128 divides
    assert tiling.tile_cost(None, v5e, 4096).compute_bound is None  # no chip, no verdict
    assert tiling.flash_block_sizes(64, 512) == tiling.FlashBlockSizes(block_q=64, block_k=128)


def test_tolerance_formula():
    assert tiling.tolerance("bf16", 1) == pytest.approx(2**-7 + 2 * 2**-23)
    assert tiling.tolerance("float32", 256) == pytest.approx(2**-23 + 2 * 2**-23 * 16)


def _blocks(m, n, k):
    return tiling.BlockSizes(block_m=m, block_n=n, block_k=k)


BAD = [
    (lambda: tiling.block_sizes("v9", 128, 128, 128), r"^chip='v9'"),
    (lambda: tiling.block_sizes("v5e", 128, 128, 128, "fp8"), r"^dtype='fp8'"),
    (lambda: tiling.block_sizes("v5e", 0, 128, 128), r"^m=0: not a count"),
    (lambda: tiling.block_sizes("v5e", 200, 128, 128), r"^m=200: no tile side"),
    (lambda: tiling.tile_cost("v5e", _blocks(128, 128, 128), 0), r"^k=0: not a count"),
    (lambda: tiling.tolerance("f32", 0), r"^k=0"),
    (lambda: tiling.flash_block_sizes(0, 8), r"^t=0: not a count"),
    (lambda: _blocks(0, 128, 128), r"^block_m=0: not a count"),
    (lambda: tiling.FlashBlockSizes(block_q=8, block_k=1.5), r"^block_k=1.5: not a count"),
    (
        lambda: kernels.matmul(jnp.ones((256, 256)), jnp.ones((256, 256)), block_sizes=_blocks(128, 128, 100)),
        r"^block_k=100: does not divide",
    ),
    (
        lambda: kernels.matmul(jnp.ones((256, 256)), jnp.ones((256, 256)), block_sizes=(128, 128, 128)),
        r"^block_sizes=\(128, 128, 128\): not a tiling.BlockSizes",
    ),
    (lambda: kernels.matmul(jnp.ones((256,)), jnp.ones((256, 256))), r"^x.shape=\(256,\)"),
    (lambda: kernels.matmul(jnp.ones((8, 256)), jnp.ones((128, 8))), r"^y.shape=\(128, 8\)"),
    (
        lambda: kernels.matmul(jnp.ones((8, 8), jnp.int32), jnp.ones((8, 8), jnp.int32)),
        r"^x.dtype='int32': unknown dtype",
    ),
    (lambda: kernels.flash_attention(jnp.ones((8, 4)), jnp.ones((8, 5)), jnp.ones((8, 4))), r"^k.shape=\(8, 5\)"),
    (
        lambda: kernels.flash_attention(jnp.ones((16, 4)), jnp.ones((8, 4)), jnp.ones((8, 4)), causal=True),
        r"^causal=True: 8 keys",
    ),  # fmt: skip
    (
        lambda: kernels.flash_attention(
            *(jnp.ones((16, 4)),) * 3, block_sizes=tiling.FlashBlockSizes(block_q=5, block_k=16)
        ),
        r"^block_q=5: does not divide",
    ),  # fmt: skip
]


@pytest.mark.parametrize(("call", "start"), BAD, ids=[f"bad{i}" for i in range(len(BAD))])
def test_bad_input_raises_a_value_error_naming_the_argument(call, start):
    with pytest.raises(ValueError, match=start):
        call()


def test_pallas_compiles_only_where_it_can():
    """TPUs (Mosaic; v2 and v3 float32 only, as libtpu refuses their bf16 matmul: tests/tpu) and NVIDIA GPUs of
    compute capability 8.0 and newer (Triton); else interpreted."""
    from book_lib import devices

    assert devices.pallas_compiles_for("gpu", "a100-40gb", "8.0") and devices.pallas_compiles_for("gpu", None, "9.0")
    assert not devices.pallas_compiles_for("gpu", None, "7.5")  # Colab's free T4
    assert not devices.pallas_compiles_for("gpu", None, None)  # not an NVIDIA GPU
    assert devices.pallas_compiles_for("tpu", "tpu-v4") and devices.pallas_compiles_for("tpu", "tpu-v5e")
    assert devices.pallas_compiles_for("tpu", "tpu-v3") and devices.pallas_compiles_for("tpu", "tpu-v2")
    assert not devices.pallas_compiles_for("tpu", "tpu-v2", None, "bfloat16"), "Mosaic on v2 has no bf16 matmul"
    assert devices.pallas_compiles_for("tpu", "tpu-v5e", None, "bfloat16")
    assert not devices.pallas_compiles_for("tpu", None)
    assert not devices.pallas_compiles_for("cpu", None)


@pytest.mark.parametrize(("capability", "interpret"), [("7.5", True), ("8.0", False)])
def test_the_kernels_say_why_they_are_interpreted_on_an_old_gpu(monkeypatch, capability, interpret):
    from book_lib import devices

    t4 = devices.choose("gpu", "Tesla T4", 1, 8, compute_capability=capability)
    monkeypatch.setattr(devices, "_CHOICE", t4)
    how = kernels.backend()
    assert how.interpret is interpret
    assert (f"this one has {capability}" in how.reason) is interpret, how.reason
    assert ("compiled" if not interpret else "interpreted") in how.describe()
