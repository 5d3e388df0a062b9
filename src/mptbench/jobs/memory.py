"""The trainer's memory: a limit the supervisor enforces, and an OOM kill record that is the
trainer's own.

The kernel counts the processes its OOM killer killed in each memory cgroup: `oom_kill` in
`memory.events` (cgroup v2; `memory.events.local`: that cgroup alone) or `memory.oom_control`
(v1). A cgroup's count is anyone's in it, so the supervisor gives its trainer a memory cgroup
of its own, a child of its own one with no limit of its own (the parent's limit still holds):
a count that rose there was the trainer's OOM kill and nobody else's. Where no cgroup can be
made (no root, no delegated subtree), the count of the cgroup the trainer shares rose for
someone: it is taken as the trainer's only where the trainer's own peak resident memory (the
kernel's high-water mark, read while it ran) had reached half of that cgroup's limit; otherwise a
SIGKILL is a kill from outside, and its reason says the shared count rose for another process.
"""

from __future__ import annotations

import contextlib
import os
import select
import time
from dataclasses import dataclass, field
from pathlib import Path

from mptbench.core.hardware import own_peak_mb, peak_resident_mb

CGROUP_ROOT = Path("/sys/fs/cgroup")
# Of the shared cgroup's limit, how much the trainer must have held for its count to be blamed
# on the trainer.
SHARED_BLAME_SHARE = 0.5
SAMPLE_S = 0.05
# Without a limit the peak is only evidence: read once a second (the kernel's high-water mark
# misses nothing between reads), and at the trainer's end.
IDLE_SAMPLE_S = 1.0


@dataclass(frozen=True)
class Limit:
    """A resident-memory limit a process is killed past, and the setting that set it: the
    kill's reason names the setting that fired."""

    mb: int
    setting: str

    def __str__(self) -> str:
        return f"{self.setting}={self.mb}"


def trainer_limit(run) -> Limit | None:
    """train.kill_above_mb of a run, where it sets one."""
    mb = run.train.kill_above_mb
    return Limit(mb, "train.kill_above_mb") if mb else None


@dataclass(frozen=True)
class Cgroup:
    """A memory cgroup: its folder and the cgroup version whose files it has."""

    path: Path
    version: int

    def oom_kills(self, local: bool = False) -> tuple[int, str] | None:
        """(its OOM kill count, the file it came from), if it can be read."""
        names = ["memory.oom_control"] if self.version == 1 else ["memory.events"]
        if local and self.version == 2:
            names.insert(0, "memory.events.local")
        for name in names:
            try:
                for line in (self.path / name).read_text().splitlines():
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value), str(self.path / name)
            except (OSError, ValueError):
                continue
        return None

    def limit_mb(self) -> float | None:
        """Its memory limit in MB; None where there is none."""
        name = "memory.limit_in_bytes" if self.version == 1 else "memory.max"
        try:
            value = (self.path / name).read_text().strip()
        except OSError:
            return None
        if value == "max" or not value.isdigit() or int(value) >= 2**60:
            return None
        return int(value) / 2**20

    def set_limit(self, mb: int) -> bool:
        """Limit its memory (and memory plus swap, where the kernel counts that) to `mb`: past
        it the kernel's OOM killer acts inside this cgroup. False where it cannot be set."""
        value = str(int(mb * 2**20))
        files = (
            ["memory.limit_in_bytes", "memory.memsw.limit_in_bytes"]
            if self.version == 1
            else ["memory.max", "memory.swap.max"]
        )
        try:
            (self.path / files[0]).write_text(value)
        except OSError:
            return False
        with contextlib.suppress(OSError):  # no swap accounting: nothing to swap to either
            (self.path / files[1]).write_text(value if self.version == 1 else "0")
        return True

    def peak_mb(self) -> float | None:
        """The most memory it has held (MB), where a file says so (memory.peak, or
        memory.max_usage_in_bytes on cgroup v1)."""
        name = "memory.max_usage_in_bytes" if self.version == 1 else "memory.peak"
        try:
            return int((self.path / name).read_text().split()[0]) / 2**20
        except (OSError, ValueError, IndexError):
            return None


def _cgroups(proc_cgroup: str) -> list[Cgroup]:
    """Where this process's memory cgroup may be, v2 first."""
    found = []
    for line in proc_cgroup.splitlines():
        _, controllers, path = line.split(":", 2)
        path = path.lstrip("/")
        if controllers == "":
            found += [Cgroup(CGROUP_ROOT / path, 2), Cgroup(CGROUP_ROOT / "unified" / path, 2)]
        elif "memory" in controllers.split(","):
            found.append(Cgroup(CGROUP_ROOT / "memory" / path, 1))
    return found


def own_cgroup() -> Cgroup | None:
    """This process's memory cgroup: the first whose OOM kill count can be read."""
    try:
        candidates = _cgroups(Path("/proc/self/cgroup").read_text())
    except OSError:
        return None
    return next((c for c in candidates if c.oom_kills() is not None), None)


def child_cgroup(parent: Cgroup, pid: int) -> Cgroup | None:
    """A memory cgroup for `pid` alone under `parent`, the process moved into it; None where
    none can be made here (a cgroup without its own OOM count is no evidence)."""
    child = Cgroup(parent.path / f"mptbench-trainer-{pid}", parent.version)
    try:
        # cgroup v1 without hierarchy (kernels before 5.x): a child would escape the limit.
        if parent.version == 1 and (parent.path / "memory.use_hierarchy").read_text() == "0\n":
            return None
        child.path.mkdir()
    except OSError:
        return None
    try:
        if child.oom_kills(local=True) is None:
            raise OSError("no memory controller in the new cgroup")
        (child.path / "cgroup.procs").write_text(str(pid))
    except OSError:
        remove(child)
        return None
    return child


def remove(cgroup: Cgroup) -> None:
    """Remove an emptied cgroup (its process may take a moment to leave it)."""
    for _ in range(40):
        try:
            cgroup.path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.05)


@dataclass
class Evidence:
    """What the kernel and the supervisor saw of a trainer's memory while it ran."""

    shared: Cgroup | None
    shared_before: tuple[int, str] | None
    own: Cgroup | None = None
    peak_rss_mb: float = 0.0
    notes: list[str] = field(default_factory=list)

    @classmethod
    def start(cls) -> Evidence:
        """Before the trainer starts: the shared cgroup's count."""
        shared = own_cgroup()
        return cls(shared, shared.oom_kills() if shared else None)

    def adopt(self, pid: int) -> None:
        """Give the trainer its own cgroup, where one can be made."""
        if self.shared is not None:
            self.own = child_cgroup(self.shared, pid)

    def limit(self, mb: int) -> bool:
        """The kernel's limit on the trainer's own cgroup; False where it has none."""
        return self.own is not None and self.own.set_limit(mb)

    def counted_mb(self) -> float | None:
        """The most the trainer's own cgroup held (MB): what a limit on it counts."""
        return self.own.peak_mb() if self.own is not None else None

    def release(self) -> None:
        if self.own is not None:
            remove(self.own)

    def oom_record(self) -> str | None:
        """The trainer's own OOM kill record, when there is one; the shared count's rise is
        noted (self.notes) where it is not taken as the trainer's."""
        if self.own is not None:
            count = self.own.oom_kills(local=True)
            if count is not None and count[0] > 0:
                return f"{count[1]}: oom_kill 0 -> {count[0]}"
        rose = self._shared_rise()
        if rose is None:
            return None
        limit = self.shared.limit_mb() if self.shared else None
        if self.own is None and limit and self.peak_rss_mb >= SHARED_BLAME_SHARE * limit:
            return f"{rose}, the trainer holding {self.peak_rss_mb:.0f} of its {limit:.0f} MB"
        of = f"of its {limit:.0f} MB" if limit else "(the cgroup has no limit)"
        held = f"the trainer held at most {self.peak_rss_mb:.0f} MB {of}"
        whose = "not the trainer's own cgroup" if self.own else held
        self.notes.append(f"an OOM kill in the cgroup it shares was another process's ({rose}; "
                          f"{whose})")
        return None

    def _shared_rise(self) -> str | None:
        if self.shared is None or self.shared_before is None:
            return None
        after = self.shared.oom_kills()
        if after is None or after[0] <= self.shared_before[0]:
            return None
        return f"{after[1]}: oom_kill {self.shared_before[0]} -> {after[0]}"


def watch(child, limit: Limit | None, evidence: Evidence | None = None) -> tuple[int, str | None]:
    """Wait for the child, reading its peak resident memory (the kernel's high-water mark,
    VmHWM: every peak, however brief, up to the read) every SAMPLE_S with a limit, or every
    IDLE_SAMPLE_S without one, and once more when it is reaped; with a limit, kill it once its
    memory has passed the limit, as an OOM killer would. The wait sleeps on the child's exit
    between reads: a watcher that woke every few milliseconds made each timed step about 1%
    slower on 2 cores (bench_sources.py). The peak goes to `evidence`. Returns the exit code
    and, when it was killed here, why."""
    # The kernel's count of a child at its end starts from the peak of the process it was
    # started from (Linux keeps the old memory's high-water mark at exec): above the
    # supervisor's own, it is the child's.
    floor, _ = own_peak_mb()
    interval = SAMPLE_S if limit else IDLE_SAMPLE_S
    with _exit_of(child) as wait:
        while (code := _reaped(child, os.WNOHANG, evidence, floor)) is None:
            peak = _peak_mb(child.pid)
            if peak is not None and evidence is not None:
                evidence.peak_rss_mb = max(evidence.peak_rss_mb, peak)
            if limit and peak is not None and peak > limit.mb:
                child.kill()
                code = _reaped(child, 0, evidence, floor)
                return code, f"resident memory reached {peak:.0f} MB, over {limit}"
            wait(interval)
    return code, None


def _peak_mb(pid: int) -> float | None:
    """A live process's peak resident memory so far (VmHWM); without /proc, its resident memory
    now; None where neither can be read (it just ended)."""
    peak = peak_resident_mb(pid)
    if peak is not None:
        return peak
    import psutil

    try:
        return psutil.Process(pid).memory_info().rss / 2**20
    except psutil.Error:
        return None


@contextlib.contextmanager
def _exit_of(child):
    """A wait(seconds) that returns as soon as the child exits (a pidfd, Linux 5.3 or later),
    or after `seconds`."""
    try:
        fd = os.pidfd_open(child.pid)
    except (AttributeError, OSError):
        yield time.sleep
        return
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    try:
        yield lambda seconds: poller.poll(int(seconds * 1000))
    finally:
        os.close(fd)


def _reaped(child, options: int, evidence: Evidence | None, floor: float) -> int | None:
    """The child's exit code once it has ended (reaped here; the kernel's count of its peak
    added to `evidence` where it is above `floor`, the supervisor's own), or None while it runs
    (with os.WNOHANG)."""
    try:
        pid, status, usage = os.wait4(child.pid, options)
    except ChildProcessError:  # reaped already: its code is known, its last peak is not
        return child.wait()
    if pid == 0:
        return None
    child.returncode = os.waitstatus_to_exitcode(status)
    peak = usage.ru_maxrss / 1024  # kB on Linux
    if evidence is not None and peak > floor:
        evidence.peak_rss_mb = max(evidence.peak_rss_mb, peak)
    return child.returncode
