"""Two timing jobs on one device wait for each other, across Snakemake runs and processes."""

import os
import subprocess
import sys
import threading
import time

import pytest

from mptbench.jobs import device_lock
from mptbench.jobs.launcher import timed_device

HOLD = """
import sys, time
from mptbench.jobs import device_lock
with device_lock.holding("cpu"):
    print("held", flush=True)
    time.sleep(60)
"""


def _never(line, **_):
    raise AssertionError(f"said {line!r} where nothing held the device")


@pytest.mark.slow  # a holder in a process of its own
def test_a_second_job_waits_until_the_first_is_killed(tmp_path, monkeypatch):
    """A holder killed with SIGKILL releases the device at once (an flock dies with it); the
    waiter says what it waited for and for how long."""
    monkeypatch.setenv(device_lock.ENV, str(tmp_path))
    holder = subprocess.Popen([sys.executable, "-c", HOLD], stdout=subprocess.PIPE, text=True,
                              env={**os.environ})
    try:
        assert holder.stdout.readline().strip() == "held"
        threading.Timer(1.0, holder.kill).start()
        said: list[str] = []
        with device_lock.holding("cpu", log=lambda line, **_: said.append(line)) as waited:
            assert waited >= 0.9
        assert said[0].startswith(f"waiting for cpu: another timing job holds {tmp_path}")
        assert said[1].startswith("cpu is free after ")
    finally:
        holder.kill()
        holder.wait()
    with device_lock.holding("cpu", log=_never) as waited:  # free: no word said
        assert waited < 1


@pytest.mark.slow  # a job in a process pinned to other cores
def test_jobs_pinned_to_other_cores_do_not_share_a_lock(tmp_path):
    """The CPU's lock is per set of cores, so jobs a scheduler pinned apart run side by side;
    a GPU's is per GPU."""
    if not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two cores to pin a process to one of them")
    code = "from mptbench.jobs import device_lock; print(device_lock.lock_name('cpu'))"

    def name(cores):
        pin = (lambda: os.sched_setaffinity(0, cores)) if cores else None
        return subprocess.run([sys.executable, "-c", code], preexec_fn=pin, text=True,
                              capture_output=True, check=True).stdout.strip()

    first, second = sorted(os.sched_getaffinity(0))[:2]
    assert name(None) == device_lock.lock_name("cpu")
    assert len({name(None), name({first}), name({second})}) == 3
    assert device_lock.lock_name("gpu1") == "gpu1.lock"


def test_only_jobs_that_time_hold_a_device(tmp_path):
    from workflow_helpers import smoke_cell_run

    from mptbench.core.contract import CalibrateJob, DescribeJob, ProbeJob, RepeatJob

    run = smoke_cell_run()
    assert timed_device(RepeatJob(out="o", runs=(run,), prepared="p")) == "cpu"
    assert timed_device(ProbeJob(out="o", run=run, prepared="p")) == "cpu"
    calibrate = CalibrateJob(out="o", device="gpu0", backend="jax", variant="v", settings=None)
    assert timed_device(calibrate) == "gpu0"
    assert (
        timed_device(DescribeJob(out="o", model=run.model, image_size=32, num_classes=10)) is None
    )
    started = time.monotonic()
    with device_lock.holding(None, log=_never) as waited:
        assert waited == 0.0 and time.monotonic() - started < 1
