"""Whose OOM kill the kernel counted: the trainer's own cgroup, else the shared one only with
the trainer's own memory near its limit."""

import resource
import subprocess
import sys
from pathlib import Path

import pytest

from mptbench.core.outcomes import classify_death
from mptbench.jobs import memory
from mptbench.jobs.memory import Cgroup, Evidence


def test_where_a_process_memory_cgroup_may_be_for_v1_and_v2():
    found = memory._cgroups("0::/job\n4:memory:/slurm/job1\n2:cpu,cpuacct:/x\n")
    root = Path("/sys/fs/cgroup")
    assert found == [
        Cgroup(root / "job", 2),
        Cgroup(root / "unified/job", 2),
        Cgroup(root / "memory/slurm/job1", 1),
    ]


def _v2(folder: Path, kills: int, local: int | None = None, limit: str = "max") -> Cgroup:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "memory.events").write_text(f"low 0\nhigh 0\nmax 3\noom 1\noom_kill {kills}\n")
    if local is not None:
        (folder / "memory.events.local").write_text(f"oom_kill {local}\n")
    (folder / "memory.max").write_text(f"{limit}\n")
    return Cgroup(folder, 2)


def test_counts_and_limits_as_the_kernel_writes_them(tmp_path):
    v2 = _v2(tmp_path / "v2", 3, local=1, limit=str(2 * 2**30))
    assert v2.oom_kills() == (3, str(v2.path / "memory.events"))
    assert v2.oom_kills(local=True) == (1, str(v2.path / "memory.events.local"))
    assert v2.limit_mb() == 2048
    assert _v2(tmp_path / "nolimit", 0).limit_mb() is None
    v1 = tmp_path / "v1"
    v1.mkdir()
    (v1 / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n")
    (v1 / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    assert Cgroup(v1, 1).oom_kills() == (2, str(v1 / "memory.oom_control"))
    assert Cgroup(v1, 1).limit_mb() is None  # the kernel's "no limit"


def test_a_cgroup_without_its_own_count_is_not_made(tmp_path):
    """A plain folder is no cgroup: no OOM count appears in it, so there is no evidence."""
    parent = _v2(tmp_path / "job", 0)
    assert memory.child_cgroup(parent, 1234) is None
    assert not (parent.path / "mptbench-trainer-1234").exists()


def test_the_trainers_own_count_is_its_oom(tmp_path):
    shared = _v2(tmp_path / "job", 0)
    evidence = Evidence(shared, shared.oom_kills(), own=_v2(shared.path / "trainer", 1, local=1))
    assert evidence.oom_record() == f"{shared.path}/trainer/memory.events.local: oom_kill 0 -> 1"


def test_a_neighbours_kill_in_the_shared_cgroup_is_not_the_trainers(tmp_path):
    shared = _v2(tmp_path / "job", 0, limit=str(4 * 2**30))
    own = _v2(shared.path / "trainer", 0, local=0)
    evidence = Evidence(shared, shared.oom_kills(), own=own, peak_rss_mb=3900)
    _v2(shared.path, 1, limit=str(4 * 2**30))  # someone in the job's cgroup was OOM-killed
    assert evidence.oom_record() is None  # the trainer's own count did not move
    assert evidence.notes == [
        f"an OOM kill in the cgroup it shares was another process's ({shared.path}/memory.events"
        ": oom_kill 0 -> 1; not the trainer's own cgroup)"
    ]
    outcome, reason = classify_death(-9, None, None, evidence.notes)
    assert outcome == "killed" and "another process's" in reason


def test_without_a_cgroup_of_its_own_the_trainers_memory_decides(tmp_path):
    """Where no cgroup can be made, the shared count is the trainer's only where the trainer
    held at least half of the cgroup's limit."""
    shared = _v2(tmp_path / "job", 0, limit=str(4 * 2**30))
    small = Evidence(shared, shared.oom_kills(), peak_rss_mb=600)
    large = Evidence(shared, shared.oom_kills(), peak_rss_mb=3900)
    _v2(shared.path, 1, limit=str(4 * 2**30))
    assert small.oom_record() is None
    assert "the trainer held at most 600 MB of its 4096 MB" in small.notes[0]
    assert large.oom_record() == (
        f"{shared.path}/memory.events: oom_kill 0 -> 1, the trainer holding 3900 of its 4096 MB"
    )


# The tests below start processes that hold 200 MB to 1 GB for seconds each (the supervisor's
# own 1 GB among them): slow, and heavy beside other work.
SPAWNS = pytest.mark.slow


def _child(code: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code])


@SPAWNS
def test_the_trainers_peak_memory_is_its_own_however_brief():
    """A peak between two reads still counts (the kernel's high-water mark), also for a trainer
    killed by a signal, and the supervisor's own memory is never taken for the trainer's (Linux
    starts a child's count at its parent's peak): here the supervisor holds about 1 GB."""
    big = b"x" * (1000 * 2**20)  # noqa: F841 - the supervisor's own peak
    evidence = Evidence(None, None)
    child = _child("import os, time; b = b'x' * (300 * 2**20); time.sleep(1.5); os._exit(3)")
    assert memory.watch(child, None, evidence) == (3, None)
    assert child.poll() == 3
    assert 300 <= evidence.peak_rss_mb < 600
    killed = Evidence(None, None)
    child = _child(
        "import os, time; b = b'x' * (200 * 2**20); time.sleep(1.5); os.kill(os.getpid(), 9)"
    )
    assert memory.watch(child, None, killed) == (-9, None)
    assert 200 <= killed.peak_rss_mb < 300


@SPAWNS
def test_a_peak_too_brief_for_any_read_is_the_kernels_count_at_the_end():
    """A trainer whose peak came and went between reads: its count when it is reaped, where it is
    above the supervisor's own (a small supervisor here, a fresh Python)."""
    script = (
        "import subprocess, sys\n"
        "from mptbench.jobs.memory import Evidence, watch\n"
        "child = subprocess.Popen([sys.executable, '-c', \"b = b'x' * (300 * 2**20)\"])\n"
        "evidence = Evidence(None, None)\n"
        "print(watch(child, None, evidence)[0], evidence.peak_rss_mb)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    code, peak = out.stdout.split()
    assert code == "0" and 300 <= float(peak) < 600


@SPAWNS
def test_waiting_for_the_trainer_wakes_the_supervisor_rarely():
    """The supervisor shares the trainer's cores: a watcher that woke every few milliseconds
    made each timed step about 1% slower (bench/README.md, bench_sources.py). Without a memory
    limit it reads the trainer's peak once a second and otherwise sleeps until the trainer
    ends: two seconds' wait is a few context switches, not the old loop's ninety."""
    child = _child("import time; time.sleep(2)")
    before = resource.getrusage(resource.RUSAGE_THREAD)
    assert memory.watch(child, None, Evidence(None, None)) == (0, None)
    after = resource.getrusage(resource.RUSAGE_THREAD)
    assert after.ru_nvcsw - before.ru_nvcsw <= 8


@SPAWNS
def test_over_the_limit_the_trainer_is_killed_and_says_so():
    evidence = Evidence(None, None)
    child = _child("import time; b = b'x' * (400 * 2**20); time.sleep(60)")
    limit = memory.Limit(200, "device.cpu.fits_search_mb")  # the setting that fired is named
    code, why = memory.watch(child, limit, evidence)
    assert code == -9 and child.poll() == -9
    assert why.startswith("resident memory reached ")
    assert why.endswith(" MB, over device.cpu.fits_search_mb=200")
    assert evidence.peak_rss_mb > 200
