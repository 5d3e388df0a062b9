"""Backends: each names its own errors, GPUs it cannot see fail with one line, TF32 is honest."""

import os
import stat
import subprocess
import sys

import pytest

from mptbench.core.cells import BACKENDS
from mptbench.engine import backends

FAKE_SMI = """#!/bin/sh
case "$1" in
  -L) echo "GPU 0: NVIDIA H200 (UUID: GPU-00000000-0000-0000-0000-000000000000)";;
  *) echo "0, NVIDIA H200, 9.0, 143771";;
esac
"""


@pytest.fixture
def fake_gpu(tmp_path, monkeypatch):
    """A machine whose nvidia-smi lists an H200 that no framework here can reach."""
    smi = tmp_path / "nvidia-smi"
    smi.write_text(FAKE_SMI)
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return smi


def test_every_backend_is_known_by_its_name_and_unknown_names_are_refused():
    assert tuple(backends.BACKENDS) == BACKENDS
    for name in BACKENDS:
        assert backends.backend(name).name == name
    with pytest.raises(ValueError, match="unknown backend 'jaxx'.*tensorflow, jax, torch"):
        backends.backend("jaxx")


def test_tf32_is_effective_only_on_ampere_and_newer_gpus_when_allowed():
    assert backends.tf32_effective(True, "cpu", None) is None
    assert backends.tf32_effective(True, "gpu0", 9.0) is True  # H200
    assert backends.tf32_effective(True, "gpu0", 7.0) is False  # V100: no TF32
    assert backends.tf32_effective(False, "gpu0", 9.0) is False
    assert backends.tf32_effective(True, "gpu0", None) is False


def test_a_gpu_the_backend_cannot_see_fails_with_one_line_naming_the_extra(fake_gpu):
    import jax

    jax_backend = backends.backend("jax")
    jax_backend.require_gpu(jax, "cpu")  # a CPU cell needs no GPU
    with pytest.raises(RuntimeError) as raised:
        jax_backend.require_gpu(jax, "gpu0")
    message = str(raised.value)
    assert "\n" not in message
    assert "nvidia-smi lists NVIDIA H200 but JAX sees no GPU" in message
    assert "pip install -e '.[jax-gpu]'" in message


def test_a_gpu_asked_for_on_a_machine_without_one_fails_with_one_line(monkeypatch, tmp_path):
    import jax

    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi anywhere
    with pytest.raises(RuntimeError, match=r"^gpu0 was asked for but this machine shows no GPU"):
        backends.backend("jax").require_gpu(jax, "gpu0")


def test_jax_names_its_memory_and_unimplemented_errors():
    jax_backend = backends.backend("jax")
    oom = RuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 1.2GiB.\nmore")
    assert jax_backend.classify(None, oom) == (
        "oom",
        "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 1.2GiB.",
    )
    assert jax_backend.classify(None, RuntimeError("UNIMPLEMENTED: f16 conv"))[0] == "unsupported"
    assert jax_backend.classify(None, ValueError("shape mismatch")) is None


def test_jax_tf32_switch_sets_the_default_matmul_precision():
    import jax

    jax_backend = backends.backend("jax")
    try:
        jax_backend.set_tf32(jax, False)
        assert jax.config.jax_default_matmul_precision == "highest"
        jax_backend.set_tf32(jax, True)
        assert jax.config.jax_default_matmul_precision is None
    finally:
        jax.config.update("jax_default_matmul_precision", None)


@pytest.mark.slow  # a fresh Python process
def test_a_started_backend_refuses_a_conflicting_keras_backend():
    code = (
        "import os; os.environ['KERAS_BACKEND'] = 'torch'\n"
        "from mptbench.engine import backends\n"
        "try:\n    backends.start('jax')\n"
        "except RuntimeError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "KERAS_BACKEND=torch but this cell runs on jax"


@pytest.mark.slow
def test_tensorflow_names_only_a_missing_kernel_unsupported():
    import tensorflow as tf

    classify = backends.backend("tensorflow").classify
    missing = tf.errors.NotFoundError(
        None, None, "No registered 'Conv2DBackpropFilter' OpKernel for 'CPU' devices compatible"
    )
    assert classify(tf, missing)[0] == "unsupported"
    placement = tf.errors.InvalidArgumentError(
        None, None, "Could not find device for node: {{node Foo}} = Foo[T=DT_HALF]"
    )
    assert classify(tf, placement)[0] == "unsupported"
    # oneDNN with no kernel for a dtype at the instruction set it may use (capped at AVX2):
    # unsupported, in oneDNN's words, not TensorFlow's "Graph execution error:".
    refused = tf.errors.AbortedError(None, None, (
        "Graph execution error:\n\nDetected at node Conv2D\nOperation received an exception:"
        "Status: 3, message: could not create a primitive descriptor for the convolution forward"
        " propagation primitive. Run workload with environment variable ONEDNN_VERBOSE=all to get"
        " additional diagnostic information., in file tensorflow/core/kernels/mkl/mkl_conv_ops.cc"
    ))
    assert classify(tf, refused) == ("unsupported", "oneDNN: could not create a primitive "
                                     "descriptor for the convolution forward propagation primitive")
    other = tf.errors.InvalidArgumentError(None, None, "this shape is not supported by the model")
    assert classify(tf, other) is None
    assert classify(tf, tf.errors.ResourceExhaustedError(None, None, "OOM"))[0] == "oom"
    assert classify(tf, ValueError("anything")) is None


STARTS_WITHOUT_UNUSED = """
import sys
from mptbench.engine.backends import start
from mptbench.engine.environment import UNUSED_BY_KERAS, UNUSED_BY_TENSORFLOW
start(sys.argv[1])
skipped = UNUSED_BY_KERAS + (UNUSED_BY_TENSORFLOW if sys.argv[1] == "tensorflow" else ())
print("after start:", sorted(name for name in skipped if name in sys.modules))
import matplotlib.pyplot, pandas, sklearn
from sklearn.base import BaseEstimator
print("then:", sklearn.__name__, BaseEstimator.__name__, pandas.DataFrame({"a": [1]}).shape)
if sys.argv[1] == "tensorflow":
    import jax.numpy
    print("jax:", int(jax.numpy.ones(2).sum()))
"""


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_a_backend_starts_without_what_no_job_uses_and_a_builder_can_still_import_it(backend):
    """Keras imports scikit-learn, pandas and matplotlib (and TensorFlow JAX) for features no
    job uses (1.5-2 s of every engine start on 2 cores); the engine's start skips them, and
    code run after it imports each as usual."""
    if not backends.backend(backend).installed():
        pytest.skip(f"{backend} is not installed here")
    done = subprocess.run(
        [sys.executable, "-c", STARTS_WITHOUT_UNUSED, backend], capture_output=True, text=True,
        timeout=120, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "after start: []" in done.stdout
    assert "then: sklearn BaseEstimator (1, 1)" in done.stdout
    if backend == "tensorflow":
        assert "jax: 2" in done.stdout
