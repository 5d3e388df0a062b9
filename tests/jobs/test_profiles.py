"""A real profile of a few training steps, read offline into classes, and its closure: the
measured classes against the profiled step, which a doctored profile must fail."""

import statistics
import time
from pathlib import Path

import pytest
from workflow_helpers import composed

from mptbench.core.opclasses import CLASSES, OUTSIDE, STEP_CLASSES
from mptbench.core.policies import Policy
from mptbench.engine.models import build_model
from mptbench.engine.repeat import layer_types
from mptbench.jobs.profiles import EXECUTOR_LINES, breakdown, closure, xplane_of
from mptbench.plan import model_config

pytestmark = pytest.mark.slow


def _profiled(tmp_path, policy_name: str, side: int = 32, batch: int = 8, steps: int = 3):
    """The profile of `steps` training steps and their mean by a step clock of its own."""
    import keras
    import tensorflow as tf

    cfg = composed(None, f"policy=[{policy_name}]")
    policy = Policy.of(policy_name, cfg["policy"][policy_name])
    network = model_config(cfg, "seed_convnet")
    model = build_model(network, (side, side, 3), 10, policy)
    x, y = tf.random.uniform((batch, side, side, 3)), tf.zeros((batch,), tf.int64)
    data = tf.data.Dataset.from_tensors((x, y)).repeat()
    model.fit(data, epochs=1, steps_per_epoch=2, verbose=0)  # traced and warm
    times = []

    class Clock(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            self.started = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            times.append(1000 * (time.perf_counter() - self.started))

    tf.profiler.experimental.start(str(tmp_path))
    model.fit(data, epochs=1, steps_per_epoch=steps, verbose=0, callbacks=[Clock()])
    tf.profiler.experimental.stop()
    scopes = {"model_scope": model.name, "optimizer_scope": model.optimizer.name}
    if policy_name == "mixed_float16":
        scopes["optimizer_scope"] = model.optimizer.inner_optimizer.name
    return xplane_of(tmp_path), statistics.fmean(times), scopes, layer_types(model)


def test_float32_has_no_casts_and_mixed_float16_has_casts_and_loss_scaling(tmp_path):
    result = {}
    for policy in ("float32", "mixed_float16"):
        xplane, step_ms, scopes, layers = _profiled(tmp_path / policy, policy)
        assert xplane is not None and xplane.name.endswith(".xplane.pb")
        result[policy] = breakdown(xplane, 3, step_ms, scopes, layers)
    f32, f16 = result["float32"]["classes_ms"], result["mixed_float16"]["classes_ms"]
    assert set(f32) == {c for c, _ in CLASSES}  # on a CPU the timeline gives every class
    assert f32["cast"] == 0 and f16["cast"] > 0
    assert f32["loss_scaling"] == 0 and f16["loss_scaling"] > 0
    for cls in ("conv_forward", "conv_backward_input", "conv_backward_filter", "optimizer"):
        assert f32[cls] > 0 and f16[cls] > 0
    # What the executor did between ops and its threads' waiting, measured on the timeline;
    # tf.data's own threads are background input, not the step waiting for its batch.
    assert f32["framework"] > 0 and f32["idle"] > 0 and f32["background_input"] > 0
    assert f32["input"] < f32["background_input"]
    # Nothing rescaled: the step classes sum to the profiled step on each executor thread
    # exactly because unattributed is the measured classes' rest, which closure reports.
    found = result["float32"]
    per_thread = sum(f32[c] for c in STEP_CLASSES) / found["threads"]
    assert per_thread == pytest.approx(found["profiled_ms_per_step"])
    assert found["closure"] * found["profiled_ms_per_step"] == pytest.approx(
        per_thread - f32["unattributed"] / found["threads"]
    )
    assert found["top_ops"][0]["ms_per_step"] > 0 and found["ops_ms_per_step"] > 0
    # The same ops by layer: every one in a row, so they close as the classes do.
    for policy, found in result.items():
        rows = found["layers"]
        assert sum(r["ms"] for r in rows) == pytest.approx(found["ops_ms_per_step"]), policy
        by_type = {}
        for r in rows:
            by_type.setdefault(r["layer_type"], set()).add(r["op_class"])
        assert {"conv_forward", "conv_backward_input", "conv_backward_filter"} <= by_type["Conv2D"]
        assert "optimizer" in by_type[OUTSIDE] and "optimizer" not in by_type["Conv2D"]
    casts = {r["layer_type"] for r in result["mixed_float16"]["layers"] if r["op_class"] == "cast"}
    assert "Conv2D" in casts  # the policy's casts sit in the layers that compute in float16


def _doctored(xplane: Path, folder: Path) -> Path:
    """The same profile with every op of the step's executor threads also on a thread of its
    own, as if counted twice: the ops' time doubles, the step's timeline does not change."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    space.ParseFromString(xplane.read_bytes())
    host = next(p for p in space.planes if p.name == "/host:CPU")
    for line in [line for line in host.lines if line.name.startswith(EXECUTOR_LINES)]:
        twin = host.lines.add()
        twin.CopyFrom(line)
        twin.id = twin.display_id = 1_000_000 + line.id
        twin.name = twin.display_name = "doctored"
    out = folder / "plugins" / "profile" / "doctored" / xplane.name
    out.parent.mkdir(parents=True)
    out.write_bytes(space.SerializeToString())
    return out


def in_function(found: dict) -> float:
    """How far the measured classes account for the train function's windows on the timeline,
    over the executor threads (the closure without the Python around the step)."""
    return closure(found["classes_ms"], found["threads"], found["function_ms_per_step"])["closure"]


def test_the_classes_close_on_a_long_step_and_a_doctored_profile_fails(tmp_path):
    """Op self times (xprof's analysis) plus framework and idle (the timeline) against the
    step clock's profiled step, over the executor threads: within 15% for a step of 50 ms or
    more; with its ops counted twice, far outside."""
    xplane, step_ms, scopes, _ = _profiled(tmp_path / "long", "float32", side=64, batch=32)
    assert step_ms >= 50, f"the step was {step_ms:.1f} ms: too short for this check"
    found = breakdown(xplane, 3, step_ms, scopes)
    assert found["closure"] == pytest.approx(1, abs=0.15)
    # The train function's windows lie inside the step clock's steps, and the classes close on
    # them closer still: only the Python around the call is left out.
    assert found["function_ms_per_step"] <= step_ms
    assert in_function(found) == pytest.approx(1, abs=0.05)
    doctored = breakdown(_doctored(xplane, tmp_path / "doctored"), 3, step_ms, scopes)
    assert doctored["closure"] > 1.15 and in_function(doctored) > 1.15
    assert doctored["classes_ms"]["unattributed"] < 0  # more accounted for than the step
    # The independent measure matters too: a step clock that read half the step fails it.
    assert breakdown(xplane, 3, step_ms / 2, scopes)["closure"] > 1.15
