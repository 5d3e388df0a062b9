"""One timing job per device per machine, whichever Snakemake started it.

Within one Snakemake run the timing_<device> resource keeps timing jobs (train, probe,
calibrate) apart. Two runs on one machine (two experiments started side by side, two
checkouts) know nothing of each other, and a step timed while another process trains on the
same cores is the other's noise, not the cell's. So a timing job also holds a lock file on the
device for as long as its engine runs:

- a GPU is one lock per GPU index as this job sees it;
- the CPU is one lock per set of cores the job may run on (its affinity): two jobs that a
  scheduler such as SLURM pinned to different cores do not wait for each other; two
  `snakemake --cores all` on one workstation do.

The lock is an flock(2), so a job killed in any way releases it. Its folder is
$MPTBENCH_LOCK_DIR, else `mptbench-locks` in the system's temporary folder.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from mptbench.core.devices import Device

ENV = "MPTBENCH_LOCK_DIR"


def lock_dir() -> Path:
    return Path(os.environ.get(ENV) or Path(tempfile.gettempdir()) / "mptbench-locks")


def lock_name(device: str) -> str:
    """The lock file's name for `device` as this process sees it."""
    if Device(device).is_gpu:
        return f"{device}.lock"
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    digest = hashlib.sha256(",".join(map(str, cores)).encode()).hexdigest()[:12]
    return f"cpu-{digest}.lock"


@contextlib.contextmanager
def holding(device: str | None, log=print) -> Iterator[float]:
    """Hold the device's lock (nothing for `device` None); yields the seconds waited for it,
    and says so when another job held it."""
    if device is None:
        yield 0.0
        return
    folder = lock_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / lock_name(device)
    with open(path, "a+") as handle:
        started = time.monotonic()
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"waiting for {device}: another timing job holds {path}", flush=True)
            fcntl.flock(handle, fcntl.LOCK_EX)
            log(f"{device} is free after {time.monotonic() - started:.1f} s", flush=True)
        try:
            yield time.monotonic() - started
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
