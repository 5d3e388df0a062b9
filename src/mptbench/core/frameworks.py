"""The Keras backends mptbench knows, each declared once: what every other place asks of one.

A backend's name (KERAS_BACKEND, conf/backend/<name>.yaml, a cell's backend axis), the module
that starts it, the record's fields that hold its versions, the pyproject extras that install
it on a CPU and for GPUs, whether its op-level profile is read, how a step is fed, and how it
is told its GPU memory limit. The plan, the schema, the record, the report and the engine's
`Backend` (engine/backends.py: the framework calls that differ) all iterate over FRAMEWORKS.
Adding a backend is a Framework here, its yaml, and its Backend and kernels in the engine.
"""

from __future__ import annotations

from dataclasses import dataclass

from mptbench.core.commands import extra_pin, pip_install, program


@dataclass(frozen=True)
class Framework:
    name: str
    title: str  # how the report names it
    module: str  # what `import` starts it
    versions: tuple[str, ...]  # the run record's fields of its versions (fingerprint.<field>)
    extra: str | None  # pyproject's extra that installs it (None: it comes with mptbench)
    gpu_extra: str  # pyproject's extra that gives it GPUs
    profiled: bool  # its op-level profile is read (TensorFlow's profiler: jobs/profiles.py)
    # How a step's batches reach it: "dataset" (the tf.data pipeline itself) or "arrays"
    # (numpy batches drawn from it; in-memory batches as its own tensors).
    feeds: str
    # Its GPU memory limit is read when it starts (an environment variable set before), not
    # set through the framework afterwards.
    memory_limit_at_start: bool = False
    # Where its extra's wheel from PyPI is a CUDA build (GPUs too, with NVIDIA's libraries):
    # the index of its CPU-only build and that build's version suffix, which `install` names.
    cpu_build: tuple[str, str] | None = None
    # How an instruction-set cap reaches its kernels (core/isa.py CAPPED_BY): oneDNN's own cap,
    # and what else it needs: "onednn" (turned on, where it would stay off), "xla" (XLA's own
    # flag), "aten" (PyTorch's vectorized kernels).
    capped_by: str = "onednn"
    # Its start says how it was built (oneDNN on or off, the CPU instructions its own kernels
    # leave unused), and the diagnosis knows which CPU flags its CPU kernels reach fast float16
    # and bfloat16 with.
    says_its_build: bool = False
    # What it imports at start for a feature no engine job uses (engine/environment.py).
    unused_imports: tuple[str, ...] = ()
    # It counts a model's FLOPs where it is installed (engine/model_info.py), in this order.
    counts_flops: bool = False

    @property
    def install(self) -> str:
        """The one line that installs it into this checkout's environment, for CPUs."""
        pin = self.cpu_build and self.extra and extra_pin(self.extra, self.module)
        if pin:
            index, suffix = self.cpu_build
            wheel = f"{self.module}=={pin}{suffix}"
            return f"{program('pip')} install {wheel} --extra-index-url {index}"
        return pip_install("." if self.extra is None else f".[{self.extra}]")

    @property
    def gpu_install(self) -> str:
        return pip_install(f".[{self.gpu_extra}]")


TENSORFLOW = Framework(
    "tensorflow", "TensorFlow", "tensorflow", ("tensorflow",), None, "gpu",
    profiled=True, feeds="dataset", says_its_build=True, counts_flops=True,
    # Its lite converter imports JAX where it is installed, for a jit it only tries.
    unused_imports=("jax",),
)
JAX = Framework(
    "jax", "JAX", "jax", ("jax", "jaxlib"), "jax", "jax-gpu",
    profiled=False, feeds="arrays", memory_limit_at_start=True, capped_by="xla",
    counts_flops=True,
)
# PyPI's torch wheel for Linux is a CUDA build (GPUs and CPUs, with NVIDIA's libraries): the
# torch extra is for GPUs, and a CPU takes PyTorch's CPU-only build of the same pin.
TORCH = Framework(
    "torch", "PyTorch", "torch", ("torch",), "torch", "torch",
    profiled=False, feeds="arrays", cpu_build=("https://download.pytorch.org/whl/cpu", "+cpu"),
    capped_by="aten",
)
FRAMEWORKS: tuple[Framework, ...] = (TENSORFLOW, JAX, TORCH)
# The backend a run is on where nothing names one (records from before backends were an axis,
# an engine job that says none): mptbench's own dependency.
DEFAULT = TENSORFLOW
BY_NAME = {f.name: f for f in FRAMEWORKS}
NAMES = tuple(BY_NAME)
# Every record field that holds a framework's version, in order (Keras' own is apart), and how
# the report names it: 'TensorFlow' for tensorflow, a field no framework is named by as it is.
VERSION_FIELDS = tuple(v for f in FRAMEWORKS for v in f.versions)
VERSION_TITLES = {v: BY_NAME[v].title if v in BY_NAME else v for v in VERSION_FIELDS}


def framework(name: str) -> Framework:
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown backend {name!r}; one of {', '.join(NAMES)}") from None
