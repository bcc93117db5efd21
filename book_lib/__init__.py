"""book_lib: the hardware specs, cost models and JAX demos behind the executable edition of
"How to Scale Your Model" (Austin, Douglas, Frostig, Levskaya, Chen, Vikram, Lebron, Choy,
Ramasesh, Webson and Pope, 2025).

Every module is reachable from the package (`book_lib.roofline.matmul_cost(...)`) and is imported
the first time it is used. `LAYERS` is the module map, lowest layer first: a module imports only
from its own layer and the layers below it (`tests/pure/test_layers.py`), and the reference pages,
their table of contents and CONTRIBUTING's table are written from it (`make sync`).
"""

import importlib
from types import MappingProxyType, ModuleType

__version__ = "0.1.0"

# layer -> module -> what it holds, in one line.
LAYERS: MappingProxyType[str, dict[str, str]] = MappingProxyType({
    "base": {
        "efficiency": "what a chip achieves against its datasheet, each rate measured and cited",
        "hardware": "every chip's figures, with their sources",
        "checks": "argument validation, one kind of error for bad input",
        "numfmt": "the one rule for writing a number (989 TFLOPs/s, 234 881 024, 11.5 × 10¹²)",
        "answer_rules": "what each exercise question asks of an answer's form, written from the course's keys",
    },
    "cost models": {
        "roofline": "time from FLOPs and bytes, arithmetic intensity, the matmul cost model",
        "topology": "slices of chips (shape, hosts, wraparound links, hops) and ICI bandwidth per axis",
        "collectives": "the collectives' times on ICI, DCN or PCIe, and their names in every spelling",
        "gpu": "GPUs: an SM's share, shared-memory tiles, AllReduce across nodes",
        "notation": "the book's sharding notation, A[I_X, J], and what a device holds of it",
        "sharding": "the plan and cost of a sharded matmul",
        "breakdowns": "the records a Transformer's accounting returns",
        "op_rows": "the rows of the book's accounting tables, one per operation",
        "transformer": "a model's shapes and what they count (parameters, FLOPs, KV cache, memory)",
        "models": "published configs, released checkpoints and the book's problems",
        "inference": "prefill and decode times, the batch that fits, the slice to rent",
        "serving": "a batch of requests' latency and throughput, and prefill servers per generate server",
        "parallelism": "a step's Layout of degrees and dtypes, and its placement on the hardware",
        "bounds": "the text's closed-form bounds of training parallelism, and pipeline schedules",
        "step_collectives": "the collectives of one training step (what moves, how often, how long)",
        "overheads": "what a training step's expected time adds to its roofline",
        "training": "a training step's time and memory, and the optimizer's state",
        "runs": "a whole training run's days, chip-hours and cost, and MFU",
        "planner": "every sensible layout of a training step, ranked (`python -m book_lib plan`)",
        "published": "published runs against the models' predictions",
        "systolic": "a cycle-by-cycle NumPy model of the MXU's systolic array",
        "speculative": "speculative sampling's acceptance rules, in NumPy",
        "hlo_arrays": "HLO array types (tiling, padding, memory spaces) and the one reader of them",
        "tiling": "the Pallas kernels' block sizes from on-chip memory",
    },
    "JAX": {
        "devices": "the setup cell's device choice, and the device at hand",
        "precision": "float32 matmuls on a CPU as an accelerator rounds them",
        "ring": "the collectives written by hand as rings of ppermutes",
        "attention": "attention and the one Transformer layer of every demo",
        "decode": "a small model that generates with a KV cache",
        "hlo": "compiled programs read for their collectives, op lines and cost analysis",
        "program_rules": "the rules a graded JAX program keeps, read from its StableHLO and compiled HLO",
        "answer_check": "an exercise's answer tried as the grader reads it, before hand-in (`check(\"Q3\")`)",
        "profile": "a program's trace, HLO ops and memory",
        "bench": "timing jitted code, and the comparisons `make bench` prints",
        "calibrate": "the cited efficiencies measured on the reader's device (`python -m book_lib calibrate`)",
        "kernels": "Pallas kernels, a tiled matmul and flash attention",
        "collective_matmul": "matmuls that overlap a ring of ppermutes",
        "tpu_aot": "programs compiled by the TPU's own compiler (libtpu) for a described slice, with no TPU",
        "sharded_training": "a Transformer's training step sharded by a Layout, its memory against the TPU compiler",
    },
    "reader": {
        "legible": "no text under 9 px, no label over another, on the page",
        "plots": "the house style and the figures of chips",
        "model_plots": "the figures of a model's costs",
        "diagrams": "drawings: a chip, a systolic wave, a layer, a mesh's blocks, rings, pipeline schedules",
        "calculators": "the cost models with knobs, in a notebook and in the HTML book",
    },
})  # fmt: skip
__all__ = [module for layer in LAYERS.values() for module in layer]
__doc__ += "\n" + "\n".join(
    f"{layer}:\n" + "\n".join(f"    {module:<18} {what}" for module, what in modules.items())
    for layer, modules in LAYERS.items()
)


def layer_of(module: str) -> str:
    """The layer of `LAYERS` that holds `module` ("roofline" -> "cost models").

    Raises:
        ValueError: a name that is not a module of book_lib.
    """
    for layer, modules in LAYERS.items():
        if module in modules:
            return layer
    raise ValueError(f"module={module!r}: not a module of book_lib; allowed: {', '.join(__all__)}")


def __getattr__(name: str) -> ModuleType:
    if name in __all__:
        return importlib.import_module(f"book_lib.{name}")
    raise AttributeError(f"module 'book_lib' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
