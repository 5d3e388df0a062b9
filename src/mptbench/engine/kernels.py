"""The problems a calibration times, in each backend's own framework: a square matmul, and a
convolution's training step (forward pass, and the gradients to its input and its filter).

Each `step` returns a scalar that the caller reads back, so its time covers finished device
work; the scalar depends on every result (the forward pass's loss too), so no compiler can
leave part of the work out and have it counted anyway.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mptbench.core import frameworks

Step = Callable[[], Any]


class TensorFlowKernels:
    framework = frameworks.TENSORFLOW

    def __init__(self, tf, jit: bool = False):
        self.tf, self.jit = tf, jit

    def _function(self, fn):
        return self.tf.function(fn, jit_compile=True) if self.jit else self.tf.function(fn)

    def matmul(self, dtype: str, size: int) -> Step:
        tf = self.tf
        a = tf.cast(tf.random.uniform((size, size), seed=1), dtype)
        b = tf.cast(tf.random.uniform((size, size), seed=2), dtype)
        return self._function(lambda: tf.reduce_sum(tf.cast(tf.matmul(a, b), tf.float32)))

    def conv(self, dtype: str, shape: list[int], kernel: int, stride: int = 1) -> Step:
        tf = self.tf
        batch, height, width, c_in, c_out = shape
        x = tf.cast(tf.random.uniform((batch, height, width, c_in), seed=1), dtype)
        w = tf.cast(tf.random.uniform((kernel, kernel, c_in, c_out), seed=2), dtype)

        def step():
            with tf.GradientTape() as tape:
                tape.watch([x, w])
                y = tf.nn.conv2d(x, w, strides=stride, padding="SAME")
                loss = tf.reduce_sum(tf.cast(y, tf.float32))
            dx, dw = tape.gradient(loss, [x, w])
            return (
                loss
                + tf.reduce_sum(tf.cast(dx, tf.float32))
                + tf.reduce_sum(tf.cast(dw, tf.float32))
            )

        return self._function(step)


class JaxKernels:
    """jax.numpy and lax, jitted (JAX always compiles with XLA)."""

    framework = frameworks.JAX

    def __init__(self, jax, jit: bool = True):
        self.jax, self.jit = jax, True

    def _inputs(self, *shapes, dtype: str):
        jax = self.jax
        keys = jax.random.split(jax.random.PRNGKey(1), len(shapes))
        return [jax.random.uniform(k, s).astype(dtype) for k, s in zip(keys, shapes, strict=True)]

    def matmul(self, dtype: str, size: int) -> Step:
        jnp = self.jax.numpy
        a, b = self._inputs((size, size), (size, size), dtype=dtype)
        f = self.jax.jit(lambda a, b: jnp.sum((a @ b).astype(jnp.float32)))
        return lambda: f(a, b)

    def conv(self, dtype: str, shape: list[int], kernel: int, stride: int = 1) -> Step:
        jax, jnp = self.jax, self.jax.numpy
        batch, height, width, c_in, c_out = shape
        x, w = self._inputs(
            (batch, height, width, c_in), (kernel, kernel, c_in, c_out), dtype=dtype
        )

        def loss(x, w):
            y = jax.lax.conv_general_dilated(
                x, w, (stride, stride), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
            )
            return jnp.sum(y.astype(jnp.float32))

        def step(x, w):
            value, (dx, dw) = jax.value_and_grad(loss, argnums=(0, 1))(x, w)
            return value + jnp.sum(dx.astype(jnp.float32)) + jnp.sum(dw.astype(jnp.float32))

        f = jax.jit(step)
        return lambda: f(x, w)


class TorchKernels:
    """torch, eager, on the GPU when there is one (PyTorch has no jit_compile here)."""

    framework = frameworks.TORCH

    def __init__(self, torch, jit: bool = False):
        self.torch, self.jit = torch, False
        self.device = "cuda" if torch.cuda.is_available() else "cpu"

    def _inputs(self, *shapes, dtype: str):
        torch = self.torch
        generator = torch.Generator(device="cpu").manual_seed(1)
        return [
            torch.rand(s, generator=generator).to(self.device, getattr(torch, dtype))
            for s in shapes
        ]

    def matmul(self, dtype: str, size: int) -> Step:
        torch = self.torch
        a, b = self._inputs((size, size), (size, size), dtype=dtype)
        return lambda: torch.matmul(a, b).float().sum()

    def conv(self, dtype: str, shape: list[int], kernel: int, stride: int = 1) -> Step:
        torch = self.torch
        batch, height, width, c_in, c_out = shape
        x, w = self._inputs(
            (batch, c_in, height, width), (c_out, c_in, kernel, kernel), dtype=dtype
        )
        x.requires_grad_(True)
        w.requires_grad_(True)

        def step():
            x.grad = w.grad = None
            # torch's "same" takes stride 1 only; k // 2 on each side gives the same output size.
            y = torch.nn.functional.conv2d(x, w, stride=stride, padding=kernel // 2)
            loss = y.float().sum()
            loss.backward()
            return (loss + x.grad.float().sum() + w.grad.float().sum()).detach()

        return step


KERNELS = {k.framework.name: k for k in (TensorFlowKernels, JaxKernels, TorchKernels)}


def kernels(backend: str, framework, jit: bool = False):
    return KERNELS[backend](framework, jit)
