"""book_lib: the hardware specs, cost models and JAX demos behind the executable edition of
"How to Scale Your Model" (Austin, Douglas, Frostig, Levskaya, Chen, Vikram, Lebron, Choy,
Ramasesh, Webson and Pope, 2025).

Math modules (`hardware`, `roofline`, ...) import no JAX; `devices`, `bench`, `hlo` and `precision` do.
"""

__version__ = "0.1.0"
