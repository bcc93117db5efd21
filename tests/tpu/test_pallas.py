"""book_lib's decision to compile a Pallas kernel or interpret it, set against the TPU compiler's (Mosaic).

On every target and operand dtype, `devices.pallas_compiles` (and so `kernels.backend`) says "compile"
exactly where Mosaic compiles the kernel with `interpret=False`: TPU v2 refuses a bfloat16 matmul, so
book_lib interprets it there, and compiles float32. Mosaic also refuses a block that is not a multiple of
(8, 128), which `tiling.block_sizes` never picks for a TPU.
"""

import functools

import jax.numpy as jnp
import pytest

from book_lib import devices, hardware, kernels, tiling
from book_lib import tpu_aot as aot

BLOCKS = tiling.BlockSizes(block_m=128, block_n=128, block_k=128)
FLASH = tiling.FlashBlockSizes(block_q=128, block_k=128)
KERNELS = {
    "matmul": (lambda x: kernels._pallas_matmul(x, x, BLOCKS, "grid", False), 1),
    "flash attention": (lambda q: kernels._pallas_flash(q, q, q, FLASH, True, "grid", False), 1),
}


def _mosaic_compiles(target: str, kernel: str, dtype: str) -> bool:
    fn, _ = KERNELS[kernel]
    with aot.compiling_for(target):
        try:
            aot.compile(fn, aot.placed((512, 512), jnp.dtype(dtype)))
        except Exception as err:  # noqa: BLE001 (Mosaic's MosaicError, a JaxRuntimeError, or another)
            assert "Mosaic failed to compile TPU kernel" in str(err), err
            return False
    return True


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("kernel", list(KERNELS))
@pytest.mark.parametrize("target", list(aot.TARGETS))
def test_book_lib_compiles_a_kernel_exactly_where_mosaic_does(target, kernel, dtype):
    with aot.compiling_for(target):
        decided = devices.pallas_compiles(dtype)
        how = kernels.backend(dtype)
    assert decided == (not how.interpret)
    assert _mosaic_compiles(target, kernel, dtype) == decided, how.describe()


def test_tpu_v2_refuses_bfloat16_and_book_lib_interprets_it():
    assert not _mosaic_compiles("v2-8", "matmul", "bfloat16")
    with aot.compiling_for("v2-8"):
        how = kernels.backend("bfloat16")
        assert how.interpret and "no bfloat16 matmul" in how.reason
        x = aot.placed((512, 512), jnp.bfloat16)
        text = aot.compile(kernels.matmul, x, x).as_text()
    assert "tpu_custom_call" not in text, "interpreted: plain XLA ops, no Mosaic kernel"


def test_a_block_off_the_8_by_128_tiling_is_refused_and_never_picked():
    odd = tiling.BlockSizes(block_m=100, block_n=100, block_k=100)
    with aot.compiling_for("v5e-1"), pytest.raises(Exception, match="divisible by 8|128"):
        x = aot.placed((400, 400), jnp.float32)
        aot.compile(functools.partial(kernels._pallas_matmul, blocks=odd, style="grid", interpret=False), x, x)
    for name in ("tpu-v5e", "tpu-v5p", "tpu-v6e", "tpu-v2"):
        chip = hardware.get_chip(name)
        for side in (128, 512, 4096):
            b = tiling.block_sizes(chip, side, side, side, "bfloat16")
            assert b.block_m % 8 == 0 and b.block_n % 128 == 0 and b.block_k % 128 == 0, (name, side, b)
