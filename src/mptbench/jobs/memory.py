"""The trainer's memory: a limit the supervisor enforces, and the kernel's record of OOM kills.

The kernel counts the processes its OOM killer killed in each memory cgroup: `oom_kill` in
`memory.events` (cgroup v2) or `memory.oom_control` (v1). A count that rose while the trainer
ran, in the supervisor's own cgroup (the trainer's too), is the evidence that it was the OOM
killer; a SIGKILL without it came from somewhere else.
"""

from __future__ import annotations

import time
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")


def _cgroup_files(proc_cgroup: str) -> list[Path]:
    """Where this process's OOM kill count can be read, v2 first."""
    files = []
    for line in proc_cgroup.splitlines():
        _, controllers, path = line.split(":", 2)
        path = path.lstrip("/")
        if controllers == "":
            files += [
                CGROUP_ROOT / path / "memory.events",
                CGROUP_ROOT / "unified" / path / "memory.events",
            ]
        elif "memory" in controllers.split(","):
            files.append(CGROUP_ROOT / "memory" / path / "memory.oom_control")
    return files


def oom_kills() -> tuple[int, str] | None:
    """(the OOM kill count of this process's memory cgroup, the file it came from), if any."""
    try:
        files = _cgroup_files(Path("/proc/self/cgroup").read_text())
    except OSError:
        return None
    for path in files:
        try:
            for line in path.read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value), str(path)
        except (OSError, ValueError):
            continue
    return None


def oom_record(before: tuple[int, str] | None) -> str | None:
    """How the OOM kill count changed since `before`, when it rose."""
    after = oom_kills()
    if before is None or after is None or after[0] <= before[0]:
        return None
    return f"{after[1]}: oom_kill {before[0]} -> {after[0]}"


def watch(child, limit_mb: int | None) -> tuple[int, str | None]:
    """Wait for the child; with a limit, kill it once its resident memory passes the limit, as
    an OOM killer would. Returns the exit code and, when it was killed here, why."""
    if not limit_mb:
        return child.wait(), None
    import psutil

    watched = psutil.Process(child.pid)
    while child.poll() is None:
        try:
            rss_mb = watched.memory_info().rss / 2**20
        except psutil.Error:  # it just ended
            continue
        if rss_mb > limit_mb:
            child.kill()
            child.wait()
            return child.returncode, (
                f"resident memory reached {rss_mb:.0f} MB, over train.memory_limit_mb={limit_mb}"
            )
        time.sleep(0.05)
    return child.returncode, None
