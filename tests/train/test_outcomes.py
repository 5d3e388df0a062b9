"""Outcomes need evidence: oom only with a memory record, unsupported only for a missing kernel."""

import signal

import pytest

from mptbench.train.outcomes import classify_death, classify_error


def test_a_sigkill_without_memory_evidence_is_killed_not_oom():
    outcome, reason = classify_death(-signal.SIGKILL, None, None)
    assert outcome == "killed" and "SIGKILL" in reason and "no out-of-memory record" in reason
    outcome, _ = classify_death(-signal.SIGTERM, None, None)
    assert outcome == "killed"


def test_memory_evidence_makes_it_oom():
    assert classify_death(-9, "resident memory reached 3000 MB", None) == (
        "oom",
        "resident memory reached 3000 MB",
    )
    outcome, reason = classify_death(-9, None, "/sys/fs/cgroup/x/memory.events: oom_kill 0 -> 1")
    assert outcome == "oom" and "OOM killer" in reason and "oom_kill 0 -> 1" in reason


@pytest.mark.slow
def test_only_a_missing_kernel_is_unsupported():
    import tensorflow as tf

    missing = tf.errors.NotFoundError(
        None, None, "No registered 'Conv2DBackpropFilter' OpKernel for 'CPU' devices compatible"
    )
    assert classify_error(tf, missing)[0] == "unsupported"
    placement = tf.errors.InvalidArgumentError(
        None, None, "Could not find device for node: {{node Foo}} = Foo[T=DT_HALF]"
    )
    assert classify_error(tf, placement)[0] == "unsupported"
    other = tf.errors.InvalidArgumentError(None, None, "this shape is not supported by the model")
    assert classify_error(tf, other) is None
    assert classify_error(tf, tf.errors.ResourceExhaustedError(None, None, "OOM"))[0] == "oom"
    assert classify_error(tf, ValueError("anything")) is None
