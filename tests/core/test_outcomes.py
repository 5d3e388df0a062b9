"""Outcomes need evidence: oom only with a memory record, unsupported only for a missing kernel."""

import signal

from mptbench.core.outcomes import classify_death


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
