"""FLOPs of a training step, counted from the model's layers."""

from pathlib import Path

import pytest

from mptbench.config import compose_config
from mptbench.measure.flops import (
    forward_flops_by_kind,
    forward_flops_per_example,
    training_flops_per_step,
)
from mptbench.policies import Policy
from mptbench.train.models import build_model

CONF = Path(__file__).resolve().parents[2] / "conf"


@pytest.mark.slow
def test_flops_of_the_seed_convnet_match_a_hand_count():
    cfg = compose_config(CONF)
    model = build_model(cfg["model"], (256, 256, 3), 10, Policy("float32", "float32"))
    conv1 = 2 * 128 * 128 * 5 * 5 * 3 * 32
    conv2 = 2 * 64 * 64 * 7 * 7 * 32 * 64
    conv3 = 2 * 32 * 32 * 11 * 11 * 64 * 128
    dense = 2 * 128 * 10
    assert forward_flops_per_example(model) == conv1 + conv2 + conv3 + dense
    assert forward_flops_by_kind(model) == {"conv": conv1 + conv2 + conv3, "matmul": dense}
    assert training_flops_per_step(model, 32) == 3 * 32 * (conv1 + conv2 + conv3 + dense)
