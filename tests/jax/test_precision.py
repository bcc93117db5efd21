"""book_lib.precision: float32 matmuls rounded on a CPU as an accelerator rounds them."""

import matplotlib

matplotlib.use("Agg")

import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import textwrap  # noqa: E402

import pytest  # noqa: E402

from book_lib import precision  # noqa: E402

pytestmark = pytest.mark.usefixtures("eight_devices")


def test_precision_emulation_rejects_unknown_kinds():
    with pytest.raises(ValueError, match="kind='fp8'"):
        precision.emulate("fp8")


EMULATED = textwrap.dedent(
    """
    import jax, jax.numpy as jnp, numpy as np
    from book_lib import devices, hlo
    devices.setup(8)
    x, y = jax.random.normal(jax.random.key(0), (64, 256)), jax.random.normal(jax.random.key(1), (256, 32))
    bits = {"bf16": jnp.bfloat16}.get(devices.choice().matmul_emulation)
    rounded = lambda a: np.asarray(a.astype(bits).astype(jnp.float32), np.float64) if bits else None
    exact = np.asarray(x, np.float64) @ np.asarray(y, np.float64)
    default = np.asarray(jax.jit(jnp.matmul)(x, y), np.float64)
    with jax.default_matmul_precision("highest"):
        highest = np.asarray(jax.jit(lambda a, b: a @ b)(x, y), np.float64)
    grad = np.asarray(jax.grad(lambda a: (a @ y).sum())(x), np.float64)
    print("default", np.abs(default - exact).max())
    print("highest", np.abs(highest - exact).max())
    print("grad", np.abs(grad - np.ones((64, 32)) @ np.asarray(y, np.float64).T).max())
    if bits:
        print("rounded", np.abs(default - rounded(x) @ rounded(y)).max())
    f = lambda a, b: a @ b
    print("flops", hlo.cost(hlo.compile_on_cpu(f, x, y)).flops, "exact", 2 * 64 * 256 * 32)
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["bf16", "tf32"])
def test_emulated_precision_rounds_default_matmuls_only(kind):
    env = {**os.environ, precision.ENV_VAR: kind}
    done = subprocess.run([sys.executable, "-c", EMULATED], capture_output=True, text=True, env=env, check=True)
    out = dict(line.split(" ", 1) for line in done.stdout.splitlines()[1:])
    assert f"round float32 operands to {kind}" in done.stdout.splitlines()[0]
    assert float(out["default"]) > 1e-3, "a default-precision matmul is rounded"
    assert float(out["highest"]) < 1e-4, "'highest' stays exact"
    assert float(out["grad"]) > 1e-3, "the backward pass's matmuls are rounded too"
    if kind == "bf16":
        assert float(out["rounded"]) < 1e-3, "exactly bf16 operands with float32 accumulation"
    flops, exact = out["flops"].split(" exact ")
    assert float(flops) == float(exact), "compile_on_cpu counts the program as written"


def test_an_unknown_precision_variable_is_refused():
    env = {**os.environ, precision.ENV_VAR: "fp8"}
    code = "from book_lib import devices; devices.setup(8)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode != 0 and f"{precision.ENV_VAR}='fp8'" in done.stderr
