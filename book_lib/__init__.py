"""book_lib: the hardware specs, cost models and JAX demos behind the executable edition of
"How to Scale Your Model" (Austin, Douglas, Frostig, Levskaya, Chen, Vikram, Lebron, Choy,
Ramasesh, Webson and Pope, 2025).

Every module is reachable from the package (`book_lib.roofline.matmul_cost(...)`) and is imported
the first time it is used. The layers, lowest first:

* specs and checks: `hardware` (every chip, with sources), `checks` (argument validation), `numfmt`
  (the one rule for writing a number: 989 TFLOPs/s, 234 881 024, 11.5 × 10¹²);
* pure cost models, no JAX: `roofline`, `topology`, `collectives`, `notation` (A[I_X, J]),
  `sharding` (a sharded matmul's plan), `transformer` (counts from a
  model's shapes; `op_rows` its accounting tables' rows, `breakdowns` the records they return, `models`
  the published configs), `gpu` (SMs,
  shared-memory tiles, AllReduce across NVLink nodes),
  `inference` (decode and prefill times), `hlo_arrays` (HLO array types: tiling padding, memory spaces),
  `systolic` (a NumPy simulation), `tiling` (the Pallas kernels' block sizes from on-chip memory),
  `speculative` (speculative sampling's acceptance rules, in NumPy), `parallelism` (a step's `Layout`
  and its placement on the hardware), `bounds` (the text's closed-form parallelism bounds), `training`
  (step time, memory, whole runs and MFU on a `Layout`; `step_collectives` its collectives, `overheads`
  what its expected time adds), `planner` (every sensible layout, ranked;
  `python -m book_lib plan ...` runs it from a shell), `published` (published runs against the models);
* JAX: `devices` (the setup cell's device choice), `ring`, `attention` and `decode` (demos), `hlo` (compiled
  programs), `bench` (timing), `profile` (a program's trace, HLO ops and memory), `precision` (accelerator
  matmul rounding on a CPU), `kernels` (Pallas matmul and flash attention), `collective_matmul`
  (matmuls that overlap a ring of `ppermute`s);
* for the reader: `plots` (the house style and the figures of chips), `model_plots` (the figures of a
  model's costs), `legible` (no text under 9 px, no label over another, on the page), `diagrams`
  (how a program moves data: the collective matmul's ring), `calculators` (the models with knobs:
  ipywidgets in a notebook, a static table elsewhere).
"""

import importlib
from types import ModuleType

__version__ = "0.1.0"
__all__ = [
    "attention",
    "bench",
    "bounds",
    "breakdowns",
    "calculators",
    "checks",
    "collective_matmul",
    "collectives",
    "decode",
    "devices",
    "diagrams",
    "gpu",
    "hardware",
    "hlo",
    "inference",
    "kernels",
    "hlo_arrays",
    "legible",
    "model_plots",
    "models",
    "notation",
    "numfmt",
    "op_rows",
    "overheads",
    "parallelism",
    "planner",
    "plots",
    "precision",
    "profile",
    "published",
    "ring",
    "roofline",
    "sharding",
    "speculative",
    "step_collectives",
    "systolic",
    "tiling",
    "topology",
    "training",
    "transformer",
]


def __getattr__(name: str) -> ModuleType:
    if name in __all__:
        return importlib.import_module(f"book_lib.{name}")
    raise AttributeError(f"module 'book_lib' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
