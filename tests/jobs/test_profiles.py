"""A real profile of a few training steps, read offline into op classes."""

import time
from pathlib import Path

import pytest

from mptbench.core.jobs import ModelConfig, decode
from mptbench.core.opclasses import CLASSES
from mptbench.core.policies import Policy
from mptbench.engine.models import build_model
from mptbench.jobs.profiles import breakdown, xplane_of
from mptbench.plan import compose_config

CONF = Path(__file__).resolve().parents[2] / "conf"
pytestmark = pytest.mark.slow


def _profiled(tmp_path, policy_name: str, steps: int = 3):
    import tensorflow as tf

    cfg = compose_config(CONF, None, [f"policy=[{policy_name}]"])
    policy = Policy.of(policy_name, cfg["policy"][policy_name])
    network = decode(ModelConfig, {"name": "seed_convnet", **cfg["model"]["seed_convnet"]})
    model = build_model(network, (32, 32, 3), 10, policy)
    x, y = tf.random.uniform((8, 32, 32, 3)), tf.zeros((8,), tf.int64)
    data = tf.data.Dataset.from_tensors((x, y)).repeat()
    model.fit(data, epochs=1, steps_per_epoch=2, verbose=0)  # traced and warm
    tf.profiler.experimental.start(str(tmp_path))
    started = time.perf_counter()
    model.fit(data, epochs=1, steps_per_epoch=steps, verbose=0)
    wall_ms = 1000 * (time.perf_counter() - started) / steps
    tf.profiler.experimental.stop()
    scopes = {"model_scope": model.name, "optimizer_scope": model.optimizer.name}
    if policy_name == "mixed_float16":
        scopes["optimizer_scope"] = model.optimizer.inner_optimizer.name
    return xplane_of(tmp_path), wall_ms, scopes


def test_float32_has_no_casts_and_mixed_float16_has_casts_and_loss_scaling(tmp_path):
    result = {}
    for policy in ("float32", "mixed_float16"):
        xplane, wall_ms, scopes = _profiled(tmp_path / policy, policy)
        assert xplane is not None and xplane.name.endswith(".xplane.pb")
        result[policy] = breakdown(xplane, 3, wall_ms, 10 * wall_ms, scopes)
    f32, f16 = result["float32"]["classes_ms"], result["mixed_float16"]["classes_ms"]
    assert set(f32) == {c for c, _ in CLASSES}
    assert f32["cast"] == 0 and f16["cast"] > 0
    assert f32["loss_scaling"] == 0 and f16["loss_scaling"] > 0
    for cls in ("conv_forward", "conv_backward_input", "conv_backward_filter", "optimizer"):
        assert f32[cls] > 0 and f16[cls] > 0
    # The classes are the profile's shares applied to the measured (unprofiled) step.
    profiled = result["float32"]["profiled_ms_per_step"]
    assert sum(f32.values()) == pytest.approx(10 * profiled)
    share = f32["conv_backward_filter"] / sum(f32.values())
    ops = result["float32"]["top_ops"]
    assert 0 < share < 1 and ops[0]["ms_per_step"] > 0
    assert result["float32"]["concurrency"] >= 1.0 and result["float32"]["ops_ms_per_step"] > 0
    xplane, wall_ms, scopes = _profiled(tmp_path / "again", "float32")
    tight = breakdown(xplane, 3, wall_ms, wall_ms / 2, scopes)  # a step shorter than the ops
    assert sum(tight["classes_ms"].values()) == pytest.approx(wall_ms / 2)
    assert tight["classes_ms"]["host_overhead"] >= 0
