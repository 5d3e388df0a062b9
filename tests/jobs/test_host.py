"""The host's fastest, kept across runs: a busy run knows it ran slower than its host's own."""

import json
import math
from dataclasses import replace

import pytest
from workflow_helpers import smoke_cell_run

from mptbench.core.contract import ArmResult
from mptbench.core.host import HOST_TOLERANCE
from mptbench.jobs.host import Reference, figures


def _arm(host_ms, version="2.21.0", outcome="ok"):
    return ArmResult(0, "float32", {"tensorflow": version}, outcome=outcome,
                     measured={"host_ms": host_ms})


def test_the_fastest_is_kept_and_a_later_busy_run_is_set_against_it(tmp_path):
    run, path = smoke_cell_run(), tmp_path / "host" / "cpu.json"
    quiet = Reference(path)
    for ms in (10.4, 10.0, 10.6):
        quiet.offer(run, _arm(ms))
    assert quiet.fastest_ms == 10.0 and json.loads(path.read_text())["fastest_ms"] == 10.0
    busy = Reference(path)  # another run, an hour later, wholly in a busy spell
    arms = [_arm(ms) for ms in (17.0, 18.0, 17.5)]
    for arm in arms:
        busy.offer(run, arm)
    assert busy.fastest_ms == 10.0
    found = figures(arms, busy.fastest_ms)
    assert found["host_slowdown_most"] == 1.8
    assert found["host_widening"] == pytest.approx(math.log(1.7) - math.log1p(HOST_TOLERANCE))


def test_another_framework_or_kernel_size_starts_afresh(tmp_path):
    run, path = smoke_cell_run(), tmp_path / "cpu.json"
    Reference(path).offer(run, _arm(5.0))
    other = Reference(path)
    other.offer(run, _arm(9.0, version="2.22.0"))
    assert other.fastest_ms == 9.0
    bigger = replace(run, device=replace(run.device, host_check={**run.device.host_check,
                                                                "size": 1024}))
    again = Reference(path)
    again.offer(bigger, _arm(40.0))
    assert again.fastest_ms == 40.0


def test_a_failed_process_or_none_offers_nothing(tmp_path):
    reference = Reference(None)
    reference.offer(smoke_cell_run(), _arm(3.0, outcome="oom"))
    assert reference.fastest_ms is None and figures([_arm(3.0)], None) == {}
