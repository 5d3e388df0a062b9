"""Outcomes need evidence: oom only with a memory record, a crash only for a fault signal; and
they are named in one place, core/outcomes.py."""

import json
import re
import signal
from pathlib import Path

from mptbench.core.outcomes import WORDS, Outcome, classify_death


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


# An outcome as a quoted string ("ok", 'oom'): src/ names each one Outcome.<NAME> instead.
OUTCOME_LITERAL = re.compile(rf"""(["'])({"|".join(Outcome)})\1""")
SRC = Path(__file__).resolve().parents[2] / "src" / "mptbench"


def test_outcomes_are_named_only_in_core_outcomes():
    """In Python and in the report's templates alike: a template compares no outcome, it is
    given the cells' text worked out already (report/tables.py, in WORDS)."""
    found = []
    for path in sorted(SRC.rglob("*")):
        if path.suffix not in (".py", ".j2") or path == SRC / "core" / "outcomes.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if OUTCOME_LITERAL.search(line):
                found.append(f"{path.relative_to(SRC)}:{number}: {line.strip()}")
    assert not found, found


def test_an_outcome_is_its_plain_word_in_records_and_every_one_has_a_report_word():
    assert json.dumps({"outcome": Outcome.OVER_BUDGET}) == '{"outcome": "over_budget"}'
    assert Outcome("oom") is Outcome.OOM and f"{Outcome.OK}" == "ok"
    assert set(WORDS) == set(Outcome) and WORDS["nonfinite"] == "NaN/Inf"
