"""Where the kernel's record of OOM kills is read: cgroup v2 memory.events, v1 oom_control."""

from pathlib import Path

from mptbench.jobs import memory


def test_cgroup_files_for_v1_and_v2(monkeypatch):
    files = memory._cgroup_files("0::/job\n4:memory:/slurm/job1\n2:cpu,cpuacct:/x\n")
    root = Path("/sys/fs/cgroup")
    assert files == [
        root / "job/memory.events",
        root / "unified/job/memory.events",
        root / "memory/slurm/job1/memory.oom_control",
    ]


def test_a_count_that_rose_is_named_with_its_file(monkeypatch, tmp_path):
    events = tmp_path / "memory.events"
    events.write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    monkeypatch.setattr(memory, "_cgroup_files", lambda _: [tmp_path / "missing", events])
    before = memory.oom_kills()
    assert before == (1, str(events))
    assert memory.oom_record(before) is None
    events.write_text("oom_kill 2\n")
    assert memory.oom_record(before) == f"{events}: oom_kill 1 -> 2"
