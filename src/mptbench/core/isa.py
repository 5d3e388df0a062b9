"""Instruction-set caps: what a variant's `isa` lets the libraries use, and what they did use.

A variant with `isa: AVX2` (isa_avx2, one of the variants made from CAPS: plan/compose.py)
runs its cells with oneDNN capped at that generation (ONEDNN_MAX_CPU_ISA: TensorFlow's,
jaxlib's and PyTorch's oneDNN read it when their first primitive is made); for JAX, XLA's
generated code too (--xla_cpu_max_isa); for PyTorch, ATen's own kernels (ATEN_CPU_CAPABILITY,
which knows no generation above AVX-512). What no cap reaches is code compiled into the wheel
for one instruction set (TensorFlow's Eigen kernels): only a build changes that (the source
build variant).

The proof that a cap took: every engine process runs with ONEDNN_VERBOSE=profile_create, so
oneDNN names each primitive it creates and the implementation it chose for it
(`brg_conv_fwd:avx512_core_bf16`); `Kernels` reads those lines, and `highest` says which
generation the highest of them was built for. A cell whose kernels went above its cap is
flagged in its record and in the report.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from mptbench.core import frameworks


@dataclass(frozen=True)
class Cap:
    """One instruction-set generation: its oneDNN and XLA names, the CPU flags it needs."""

    name: str  # oneDNN's ONEDNN_MAX_CPU_ISA value
    xla: str  # XLA's --xla_cpu_max_isa value
    flags: tuple[str, ...]  # /proc/cpuinfo flags a machine needs to run it
    words: str  # what it adds, for the report
    variant: str  # the variant that caps at it (`variant=[isa_avx2]`: plan/compose.py)


# In order, each with everything before it (its rank: its place here). Each is a variant too,
# made from its entry (plan/compose.py cap_variants): a new generation is a line here.
CAPS: tuple[Cap, ...] = (
    Cap("AVX", "AVX", ("avx",), "AVX, no AVX2 or FMA (what the 2020 PyPI binary used)",
        "isa_avx"),
    Cap("AVX2", "AVX2", ("avx2", "fma"), "AVX2 and FMA", "isa_avx2"),
    Cap("AVX512_CORE", "AVX512", ("avx512f", "avx512bw", "avx512vl", "avx512dq"), "AVX-512",
        "isa_avx512_core"),
    Cap("AVX512_CORE_VNNI", "AVX512_VNNI", ("avx512_vnni",), "AVX-512 VNNI (int8 dot products)",
        "isa_avx512_core_vnni"),
    Cap("AVX512_CORE_BF16", "AVX512_BF16", ("avx512_bf16",),
        "AVX512_BF16 (bfloat16 dot products)", "isa_avx512_core_bf16"),
    Cap("AVX512_CORE_AMX", "AMX", ("amx_bf16", "amx_tile"), "AMX-BF16 (bfloat16 matrix tiles)",
        "isa_amx"),
)
NAMES = tuple(cap.name for cap in CAPS)

# The generations oneDNN names in its implementations, lowest first, each at the place of the
# cap it needs in CAPS (a half: one oneDNN has between two caps here; oneDNN 3.5 renamed
# avx512_core_fp16 to avx10_1_512).
_RANKS: dict[str, float] = {
    "sse41": -1,
    "avx": 0,
    "avx2": 1,
    "avx2_vnni": 1.5,
    "avx2_vnni_2": 1.5,
    "avx512_core": 2,
    "avx512_core_vnni": 3,
    "avx512_core_bf16": 4,
    "avx512_core_fp16": 4.5,
    "avx10_1_512": 4.5,
    "avx512_core_amx": 5,
    "avx10_1_512_amx": 5,
    "avx512_core_amx_fp16": 5.5,
    "avx10_1_512_amx_fp16": 5.5,
}
_ISA_IN_NAME = re.compile(
    r"(?<![a-z0-9])(" + "|".join(sorted(_RANKS, key=len, reverse=True)) + r")(?![a-z0-9])"
)


# A primitive's memory descriptors ("src:bf16::blocked:acdb::f0 wei:..."; "data:f32:..."):
# the data type of the first that has one.
_DTYPE_IN = re.compile(r"\b(?:src|wei|dst|data|diff)\w*:([a-z0-9]+)")


def cap(name: str | None) -> Cap | None:
    """The cap named `name` (None: none)."""
    if name is None:
        return None
    for found in CAPS:
        if found.name == name:
            return found
    raise KeyError(f"no instruction-set cap {name}; one of {', '.join(NAMES)}")


def rank(name: str) -> int:
    """A cap's place among CAPS (0: AVX)."""
    return NAMES.index(name)


def place(kernel_isa: str) -> float:
    """Where an oneDNN generation's name stands among CAPS (AVX: 0)."""
    return _RANKS.get(kernel_isa, float(len(CAPS)))


def isa_of(implementation: str) -> str | None:
    """The generation an oneDNN implementation is built for ('brg_conv_fwd:avx512_core_bf16'
    -> 'avx512_core_bf16'); None where its name gives none ('jit:uni', 'ref:any')."""
    found = _ISA_IN_NAME.findall(implementation)
    return max(found, key=_RANKS.__getitem__) if found else None


def cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> set[str]:
    """This machine's CPU flags (empty where it shows none: not Linux on x86)."""
    try:
        for line in Path(cpuinfo).read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def lacks(name: str, flags: set[str]) -> list[str]:
    """The flags a machine with `flags` lacks for cap `name` (and every generation below)."""
    needed = [f for c in CAPS[: rank(name) + 1] for f in c.flags]
    return [f for f in needed if f not in flags]


def _generation_of_flag(flag: str) -> int:
    """The place among CAPS of the generation a CPU flag comes with (0: AVX or older)."""
    for i, found in enumerate(CAPS):
        if flag in found.flags:
            return i
    if flag.startswith("amx"):
        return rank("AVX512_CORE_AMX")
    if flag.startswith("avx512"):
        return rank("AVX512_CORE")
    return rank("AVX2") if flag == "avx_vnni" else 0


def within(flags: set[str], name: str | None) -> set[str]:
    """The flags a process capped at `name` may use (all of them without a cap)."""
    if name is None:
        return set(flags)
    return {f for f in flags if _generation_of_flag(f) <= rank(name)}


def environment(name: str | None, backend: str) -> dict[str, str]:
    """The variables that cap `backend`'s kernels at `name` (none without a cap)."""
    if name is None:
        return {}
    found = cap(name)
    env = {"ONEDNN_MAX_CPU_ISA": found.name}  # every backend's oneDNN
    return env | CAPPED_BY[frameworks.framework(backend).capped_by](found)


# What else a cap needs, by how a backend's kernels are capped (Framework.capped_by).
CAPPED_BY = {
    # A cap caps nothing where TensorFlow leaves oneDNN off.
    "onednn": lambda found: {"TF_ENABLE_ONEDNN_OPTS": "1"},
    "xla": lambda found: {"XLA_FLAGS": f"--xla_cpu_max_isa={found.xla}"},
    # ATen's own vectorized kernels: default (no AVX2), avx2, avx512.
    "aten": lambda found: {
        "ATEN_CPU_CAPABILITY": ("default", "avx2", "avx512")[min(rank(found.name), 2)]},
}


@dataclass
class Kernels:
    """What oneDNN's profile_create lines said in one process: each implementation it chose,
    by the data type it computes in (a convolution's source), and the ISA it reported."""

    by_dtype: dict[str, dict[str, int]] = field(default_factory=dict)
    words: str | None = None  # oneDNN's own "isa:" line: the highest it will use

    def read(self, line: str) -> bool:
        """Take one line of the engine's output; True where it was oneDNN's."""
        if not line.startswith("onednn_verbose,"):
            return False
        parts = line.rstrip("\n").split(",")
        if len(parts) > 4 and parts[2] == "info" and parts[4].startswith("isa:"):
            self.words = ",".join(parts[4:])[4:]  # its words may hold commas
        elif len(parts) > 8 and parts[2] == "primitive" and parts[3].startswith("create"):
            implementation, descriptors = parts[6], parts[8]
            dtypes = [d for d in _DTYPE_IN.findall(descriptors) if d != "undef"]
            per = self.by_dtype.setdefault(dtypes[0] if dtypes else "?", {})
            per[implementation] = per.get(implementation, 0) + 1
        return True

    def highest(self, dtypes: tuple[str, ...] | None = None) -> str | None:
        """The highest generation any of its implementations (of `dtypes`: all) was built for."""
        names = [isa_of(impl) for d, impls in self.by_dtype.items()
                 if dtypes is None or d in dtypes for impl in impls]
        found = [n for n in names if n]
        return max(found, key=_RANKS.__getitem__) if found else None

    def facts(self, dtype: str) -> dict[str, object]:
        """What a cell computing in `dtype` records (its fingerprint's `kernels`): the highest
        generation of the whole process, and its own dtype's implementations, most used first."""
        own = self.by_dtype.get(dtype, {})
        return {
            "kernel_isa": self.highest(),
            "kernel_isa_own": self.highest((dtype,)),
            "kernels": ", ".join(sorted(own, key=lambda i: (-own[i], i))[:6]) or None,
            "onednn_isa": self.words,
        }


# Implementations oneDNN names for one generation that it also creates under the cap below:
# capped at AVX, oneDNN 3.7 created jit_1x1:avx2 for MobileNetV2's 1x1 convolutions (its cap
# is what decides which instructions a JIT kernel emits; the name is the implementation's).
ALSO_RUN_BELOW = {"avx2": "AVX"}


def above(kernel_isa: str | None, cap_name: str | None) -> bool:
    """Whether a kernel built for `kernel_isa` is above cap `cap_name` (the cap did not take)."""
    if not kernel_isa or not cap_name or ALSO_RUN_BELOW.get(kernel_isa) == cap_name:
        return False
    return _RANKS[kernel_isa] > rank(cap_name)


ONEDNN_DTYPES = {"float32": "f32", "bfloat16": "bf16", "float16": "f16"}
