"""The Keras backends a cell can run on: the one place that knows TensorFlow from JAX and PyTorch.

A cell's process gets KERAS_BACKEND before Keras starts, and only its backend's framework is
imported: a JAX cell on synthetic data imports no TensorFlow at all. What differs between the
frameworks (seeing a GPU, TF32, naming an out-of-memory error, their versions) is asked of
the `Backend` here, never of a framework directly.
"""

from __future__ import annotations

import importlib.util
import os
import re
from dataclasses import dataclass, field
from typing import Any

from mptbench.core import frameworks
from mptbench.core.devices import Device, visible_gpus
from mptbench.core.frameworks import NAMES, Framework
from mptbench.core.outcomes import Outcome, first_line
from mptbench.engine.environment import UNUSED_BY_KERAS, import_tensorflow, skipping


class GpuMissing(RuntimeError):
    """A GPU cell whose framework sees no GPU (it would time the CPU); the message is one line."""


class Backend:
    """What differs between the frameworks' calls; what each one is (its name, module, extras,
    versions' fields) is its Framework (core/frameworks.py)."""

    facts: Framework

    @property
    def name(self) -> str:
        return self.facts.name

    @property
    def title(self) -> str:
        return self.facts.title

    @property
    def module(self) -> str:
        return self.facts.module

    def installed(self) -> bool:
        return importlib.util.find_spec(self.module) is not None

    def start(self) -> tuple[Any, Any, dict[str, Any]]:
        """Import the framework and Keras: (framework, keras, facts of the start)."""
        if os.environ.get("KERAS_BACKEND", self.name) != self.name:
            raise RuntimeError(
                f"KERAS_BACKEND={os.environ['KERAS_BACKEND']} but this cell runs on {self.name}"
            )
        os.environ["KERAS_BACKEND"] = self.name
        with skipping(*UNUSED_BY_KERAS):
            framework = importlib.import_module(self.module)
            import keras

        if keras.backend.backend() != self.name:
            raise RuntimeError(f"Keras started on {keras.backend.backend()}, not on {self.name}")
        return framework, keras, {}

    def versions(self, framework) -> dict[str, Any]:
        """Its versions, by the record fields its Framework names."""
        return {self.name: framework.__version__}

    def build(self, framework) -> dict[str, Any]:
        """What its build says of itself, for the fingerprint (none by default)."""
        return {}

    def gpu_details(self, framework) -> dict[str, Any] | None:
        """Its first GPU's name and compute capability, where nvidia-smi cannot say."""
        return None

    def gpu_count(self, framework) -> int:
        raise NotImplementedError

    def set_tf32(self, framework, allowed: bool) -> None:
        """Let float32 matmuls and convolutions run as TF32 on GPUs that have it, or not."""
        raise NotImplementedError

    def classify(self, framework, exc: BaseException) -> tuple[str, str] | None:
        """An error as a cell outcome (oom, unsupported) and its reason; None: a real failure."""
        raise NotImplementedError

    def limit_gpu_memory(self, framework, mb: int, total_mb: int | None) -> None:
        """Let the framework use at most `mb` of the GPU (before its first allocation)."""
        raise NotImplementedError

    def gpu_peak_mb(self, framework) -> tuple[float, str]:
        """The framework's own peak of GPU memory in use since it started: (MB, its name)."""
        raise NotImplementedError

    def require_gpu(self, framework, device: str) -> None:
        """Fail with one line when a GPU cell's framework sees no GPU: it would time the CPU."""
        if not Device(device).is_gpu or self.gpu_count(framework) > 0:
            return
        listed = visible_gpus()
        if listed:
            raise GpuMissing(
                f"{device}: nvidia-smi lists {', '.join(listed)} but {self.title} sees no GPU; "
                f"its CUDA libraries are likely missing: {self.facts.gpu_install}"
            )
        raise GpuMissing(f"{device} was asked for but this machine shows no GPU (nvidia-smi)")


class TensorFlow(Backend):
    facts = frameworks.TENSORFLOW
    # TensorFlow's words when no kernel is registered for an op, dtype and device; and
    # oneDNN's when it has none for a dtype at the instruction set it may use (a bfloat16
    # convolution capped at AVX2: core/isa.py).
    KERNEL_MISSING = re.compile(
        r"No registered '[^']+' OpKernel|Could not find device for node|No OpKernel was registered"
        r"|could not create a primitive descriptor"
    )
    ONEDNN_REFUSED = re.compile(r"(could not create a primitive descriptor for [\w ]+? primitive)")

    def start(self):
        os.environ.setdefault("KERAS_BACKEND", self.name)
        tf, keras, facts = import_tensorflow()
        return tf, keras, facts

    def gpu_count(self, tf) -> int:
        return len(tf.config.list_physical_devices("GPU"))

    def build(self, tf) -> dict[str, Any]:
        build = dict(tf.sysconfig.get_build_info())
        return {
            "is_cuda_build": bool(build.get("is_cuda_build")),
            "cuda_version": build.get("cuda_version"),
            "cudnn_version": build.get("cudnn_version"),
            "TF_ENABLE_ONEDNN_OPTS": os.environ.get(
                "TF_ENABLE_ONEDNN_OPTS", "unset (TensorFlow's default)"
            ),
        }

    def gpu_details(self, tf) -> dict[str, Any] | None:
        gpus = tf.config.list_physical_devices("GPU")
        if not gpus:
            return None
        details = tf.config.experimental.get_device_details(gpus[0])
        capability = details.get("compute_capability")
        cc = float(f"{capability[0]}.{capability[1]}") if capability else None
        return {"name": details.get("device_name", gpus[0].name), "compute_capability": cc}

    def set_tf32(self, tf, allowed: bool) -> None:
        tf.config.experimental.enable_tensor_float_32_execution(allowed)

    def limit_gpu_memory(self, tf, mb, total_mb):
        gpu = tf.config.list_physical_devices("GPU")[0]
        config = tf.config.LogicalDeviceConfiguration(memory_limit=mb)
        tf.config.set_logical_device_configuration(gpu, [config])

    def gpu_peak_mb(self, tf):
        return tf.config.experimental.get_memory_info("GPU:0")["peak"] / 2**20, (
            "tensorflow get_memory_info peak"
        )

    def classify(self, tf, exc):
        if isinstance(exc, tf.errors.ResourceExhaustedError):
            return Outcome.OOM, first_line(exc)
        if isinstance(exc, tf.errors.OpError) and self.KERNEL_MISSING.search(str(exc)):
            # The line that says so: a graph's error opens with "Graph execution error:".
            said = next(line for line in str(exc).splitlines() if self.KERNEL_MISSING.search(line))
            refused = self.ONEDNN_REFUSED.search(said)
            return Outcome.UNSUPPORTED, f"oneDNN: {refused.group(1)}" if refused else said[:300]
        return None


class Jax(Backend):
    facts = frameworks.JAX

    def versions(self, jax) -> dict[str, Any]:
        import jaxlib

        return {"jax": jax.__version__, "jaxlib": jaxlib.__version__}

    def gpu_count(self, jax) -> int:
        try:
            return len(jax.devices("gpu"))
        except RuntimeError:  # no GPU platform: the CUDA plugin is not installed
            return 0

    def set_tf32(self, jax, allowed: bool) -> None:
        # JAX's default precision lets a GPU use TF32 for float32; "highest" is full float32.
        jax.config.update("jax_default_matmul_precision", None if allowed else "highest")

    def limit_gpu_memory(self, jax, mb, total_mb):
        # XLA's client reads its memory fraction when it starts: the engine sets it (as
        # XLA_PYTHON_CLIENT_MEM_FRACTION) before JAX is imported; here it is only checked.
        if os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION") is None:
            raise RuntimeError("JAX started without XLA_PYTHON_CLIENT_MEM_FRACTION set")

    def gpu_peak_mb(self, jax):
        stats = jax.devices("gpu")[0].memory_stats() or {}
        return stats.get("peak_bytes_in_use", 0) / 2**20, "jax memory_stats peak_bytes_in_use"

    def classify(self, jax, exc):
        text = str(exc)
        if "RESOURCE_EXHAUSTED" in text or "Out of memory" in text:
            return Outcome.OOM, first_line(exc)
        if "UNIMPLEMENTED" in text:
            return Outcome.UNSUPPORTED, first_line(exc)
        return None


class Torch(Backend):
    facts = frameworks.TORCH

    def gpu_count(self, torch) -> int:
        return torch.cuda.device_count()

    def set_tf32(self, torch, allowed: bool) -> None:
        torch.backends.cuda.matmul.allow_tf32 = allowed
        torch.backends.cudnn.allow_tf32 = allowed

    def limit_gpu_memory(self, torch, mb, total_mb):
        if not total_mb:
            raise RuntimeError("the GPU's memory size is unknown (nvidia-smi): no limit can be set")
        torch.cuda.set_per_process_memory_fraction(min(1.0, mb / total_mb), 0)

    def gpu_peak_mb(self, torch):
        return torch.cuda.max_memory_allocated(0) / 2**20, "torch max_memory_allocated"

    def classify(self, torch, exc):
        if isinstance(exc, torch.OutOfMemoryError):
            return Outcome.OOM, first_line(exc)
        if isinstance(exc, (RuntimeError, NotImplementedError)) and "not implemented for" in str(
            exc
        ):
            return Outcome.UNSUPPORTED, first_line(exc)
        return None


BACKENDS: dict[str, Backend] = {b.name: b for b in (TensorFlow(), Jax(), Torch())}
assert tuple(BACKENDS) == frameworks.NAMES, "a Framework without its Backend, or one over"


def backend(name: str) -> Backend:
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r} (allowed: {', '.join(NAMES)})")
    return BACKENDS[name]


@dataclass
class Session:
    """A started backend: its framework's module, Keras, and what the start showed."""

    backend: Backend
    framework: Any
    keras: Any
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.backend.name

    def classify(self, exc: BaseException) -> tuple[str, str] | None:
        return self.backend.classify(self.framework, exc)

    def require_gpu(self, device: str) -> None:
        self.backend.require_gpu(self.framework, device)

    def set_tf32(self, allowed: bool) -> None:
        self.backend.set_tf32(self.framework, allowed)


def start(name: str) -> Session:
    """Start a backend in this process (before anything else imports Keras)."""
    chosen = backend(name)
    framework, keras, facts = chosen.start()
    return Session(chosen, framework, keras, facts)


def tf32_effective(allowed: bool, device: str, compute_capability: float | None) -> bool | None:
    """Whether float32 ran as TF32: only GPUs from Ampere (compute capability 8.0) have it;
    None on a CPU, where the question does not arise."""
    if not Device(device).is_gpu:
        return None
    return bool(allowed and compute_capability is not None and compute_capability >= 8.0)
