"""Outcomes need evidence: oom only with a memory record, a crash only for a fault signal."""

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


def test_a_signal_the_trainer_raises_on_itself_is_a_crash_not_a_kill():
    for sig in (signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGILL, signal.SIGFPE):
        outcome, reason = classify_death(-sig, None, None)
        assert outcome == "crashed" and sig.name in reason and "not a kill from outside" in reason
    # Memory evidence still wins: an abort after a failed allocation is out of memory.
    assert classify_death(-signal.SIGABRT, None, "memory.events: oom_kill 0 -> 1")[0] == "oom"
