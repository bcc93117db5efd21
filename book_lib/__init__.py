"""book_lib: the hardware specs, cost models and JAX demos behind the executable edition of
"How to Scale Your Model" (Austin, Douglas, Frostig, Levskaya, Chen, Vikram, Lebron, Choy,
Ramasesh, Webson and Pope, 2025).

Math modules (`hardware`, `roofline`, ...) import no JAX; `devices`, `bench` and `hlo` do.
"""

__version__ = "0.1.0"


def glue(name: str, value, display: bool = False) -> None:
    """Hand `value` to the HTML book under `name` (myst-nb's glue); a no-op where myst-nb is absent.

    In Colab or plain Jupyter nothing needs it: the number is printed by the cell that computes it.
    """
    try:
        from myst_nb import glue as _glue
    except ImportError:
        return
    _glue(name, value, display=display)
