"""FLOPs counted by the framework (TensorFlow's profiler on the traced step), against counts
people know: the seed convnet by hand, ResNet-50 as commonly quoted. Each model is counted once
per framework and size (`counts`): several tests read one count."""

import functools
import sys

import pytest
from workflow_helpers import composed

from mptbench.core.contract import ConvLayer, DescribeJob, ModelConfig, ModelInfo, decode
from mptbench.engine.flops import kind_of
from mptbench.engine.model_info import describe
from mptbench.jobs.launcher import Engine, environment

pytestmark = pytest.mark.slow


def _model(name: str) -> ModelConfig:
    cfg = composed(None, f"model=[{name}]")["model"][name]
    return decode(ModelConfig, {"name": name, **cfg})


def _config(name: str) -> ModelConfig:
    return _one_conv() if name == "one_conv" else _model(name)


@functools.cache
def _describe(name: str, size: int) -> ModelInfo:
    """The count made in this process (TensorFlow's)."""
    return describe(DescribeJob("unused.json", _config(name), size, 10))


@pytest.fixture(scope="module")
def jax_count(tmp_path_factory):
    """The count a machine with JAX and no TensorFlow makes, once per model and size: an
    engine job on KERAS_BACKEND=jax."""
    folder = tmp_path_factory.mktemp("jax_counts")

    @functools.cache
    def count(name: str, size: int) -> ModelInfo:
        engine = Engine(sys.executable, environment(device="cpu", backend="jax"))
        job = DescribeJob(str(folder / f"{name}-{size}.json"), _config(name), size, 10)
        return engine.result(job, ModelInfo)

    return count


SEED = {  # the seed convnet's layers at 256 px, a multiply-add as 2 FLOPs
    "conv1": 2 * 128 * 128 * 5 * 5 * 3 * 32,
    "conv2": 2 * 64 * 64 * 7 * 7 * 32 * 64,
    "conv3": 2 * 32 * 32 * 11 * 11 * 64 * 128,
    "dense": 2 * 128 * 10,
}


def test_the_seed_convnets_training_step_matches_the_hand_count():
    info = _describe("seed_convnet", 256)
    forward = sum(SEED.values())
    # Three forward passes (the forward, the filter gradient, the input gradient) for every
    # layer but the first, whose input gradient nothing needs: it is traced, never run.
    hand = 3 * forward - SEED["conv1"]  # 8.71 GFLOP, 3.00x less the first layer's 0.08
    counted = info.training_flops_per_example
    assert counted["conv"] + counted["matmul"] == hand  # exactly
    forward_counted = info.forward_flops_per_example
    assert forward_counted["conv"] + forward_counted["matmul"] == forward
    assert info.parameters > 0 and "TensorFlow" in info.flops_counted_by
    # Its own convolutions, as the calibration times them: input size, filters, kernel, stride.
    assert [(c["input"], c["filters"], c["kernel"], c["stride"]) for c in info.conv_layers] == [
        ([256, 256, 3], 32, 5, 2),
        ([128, 128, 32], 64, 7, 2),
        ([64, 64, 64], 128, 11, 2),
    ]


def _one_conv() -> ModelConfig:
    layer = ConvLayer(filters=8, kernel_size=3, strides=1)
    return ModelConfig("one_conv", "layers", "adam", 0.001, "sparse_categorical_crossentropy",
                       "softmax", (layer,), ())


def test_a_one_conv_models_step_is_two_passes_of_its_convolution():
    """The convolution's forward pass and its filter gradient run; its input gradient, which
    TensorFlow's tape traces, does not, and is not counted (3.00x forward before, now 2)."""
    info = _describe("one_conv", 16)
    conv = 2 * 16 * 16 * 3 * 3 * 3 * 8  # 'same' padding, stride 1
    assert info.forward_flops_per_example["conv"] == conv
    assert info.training_flops_per_example["conv"] == 2 * conv


def test_resnet50s_forward_pass_is_in_the_quoted_range():
    info = _describe("resnet50", 224)
    forward = sum(info.forward_flops_per_example.values())
    assert 7.6e9 <= forward <= 8.4e9  # 3.8-4.2 GMAC per 224 px image
    assert len(info.conv_layers) == 53  # every Conv2D of ResNet-50, none left out
    assert info.parameters == pytest.approx(23.6e6, rel=0.02)  # ResNet-50's, 10 classes


def test_op_kinds():
    assert kind_of("conv_backward_filter") == "conv" and kind_of("matmul") == "matmul"
    assert kind_of("batch_norm") == "other"


@pytest.mark.parametrize(
    ("model", "size"),
    # ResNet-50 at 224 px, the size its count is quoted at (the tests above and below read the
    # same two counts); MobileNetV2's depthwise convolutions at 64.
    [("one_conv", 16), ("seed_convnet", 256), ("resnet50", 224), ("mobilenet_v2", 64)],
)
def test_tensorflow_and_jax_count_the_same_training_step(model, size, jax_count):
    tf_count, counted = _describe(model, size), jax_count(model, size)
    for kind in ("conv", "matmul"):
        tf_flops = tf_count.training_flops_per_example[kind]
        assert counted.training_flops_per_example[kind] == pytest.approx(tf_flops, rel=0.01)


def test_jax_counts_the_same_training_step_from_its_traced_program(jax_count):
    info = jax_count("seed_convnet", 256)
    assert info.flops_counted_by.startswith("JAX")
    conv1 = 2 * 128 * 128 * 5 * 5 * 3 * 32
    forward = info.forward_flops_per_example
    assert forward["conv"] == 2 * (64 * 64 * 7 * 7 * 32 * 64 + 32 * 32 * 11 * 11 * 64 * 128) + conv1
    # Three forward passes, less the first layer's input gradient, which nothing needs: a
    # strided convolution's input gradient counted at its real cost, not over dilated zeros.
    counted = info.training_flops_per_example
    assert counted["conv"] == 3 * forward["conv"] - conv1
    resnet = jax_count("resnet50", 224)
    assert 7.6e9 <= sum(resnet.forward_flops_per_example.values()) <= 8.4e9
    training = sum(resnet.training_flops_per_example.values())
    assert 2.8 <= training / sum(resnet.forward_flops_per_example.values()) <= 3.0
