"""The probe: a few steps at two small batch sizes, trained for real in this process."""

import pytest
from workflow_helpers import smoke_cell_run

from mptbench.core.contract import ProbeJob
from mptbench.engine.probe import probe_cell

pytestmark = pytest.mark.slow


def _probe(session, prepared, **train):
    job = ProbeJob("unused.json", smoke_cell_run(probe_batch_sizes=(2, 4), **train), "p.json")
    return probe_cell(session, job, prepared)


def test_the_probe_times_two_batch_sizes(tf, prepared32):
    probe = _probe(tf, prepared32, max_step_seconds=None)
    assert [p.batch_size for p in probe.points] == [2, 4]
    assert all(len(p.steps_s) == 3 and p.step_s > 0 for p in probe.points)
    assert (probe.backend, probe.variant, probe.device, probe.policy) == (
        "tensorflow",
        "pypi",
        "cpu",
        "float32",
    )
    # A limit no step can meet: the probe stops after its first step at the smaller size.
    stopped = _probe(tf, prepared32, max_step_seconds=1e-6)
    assert [len(p.steps_s) for p in stopped.points] == [1]
    # Steps that took probe_seconds already end a batch size's under the fast plan (one step
    # at least), and both sizes are still timed; the full plan times every step.
    enough = _probe(tf, prepared32, max_step_seconds=None, probe_seconds=1e-6, plan="fast")
    assert [len(p.steps_s) for p in enough.points] == [1, 1]
    full = _probe(tf, prepared32, max_step_seconds=None, probe_seconds=1e-6, plan="full")
    assert [len(p.steps_s) for p in full.points] == [3, 3]


def test_a_step_the_device_refuses_is_the_probes_outcome_in_onednns_words(
        tf, prepared32, monkeypatch):
    """As oneDNN refuses a bfloat16 convolution under an AVX2 cap on a CPU with bfloat16 math:
    the probe records unsupported with oneDNN's words, not a failed job."""
    from mptbench.engine import probe

    def refused(*args, **kwargs):
        raise tf.framework.errors.InvalidArgumentError(
            None, None, "Graph execution error:\n\ncould not create a primitive descriptor "
            "for the convolution forward propagation primitive")

    monkeypatch.setattr(probe, "time_steps", refused)
    found = _probe(tf, prepared32, max_step_seconds=None)
    assert (found.outcome, found.points) == ("unsupported", [])
    assert found.reason == ("oneDNN: could not create a primitive descriptor for the "
                            "convolution forward propagation primitive")
