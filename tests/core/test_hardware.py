"""A cell's hardware id: readable, stable, the same where the workflow plans and where a job
runs; a job on other hardware than its probe's is stopped with one line."""

import os
from pathlib import Path

import pytest

from mptbench.core import hardware


@pytest.mark.parametrize(
    ("name", "slug"),
    [
        ("Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz", "intel-xeon-gold-6248"),
        ("AMD EPYC 7B12 64-Core Processor", "amd-epyc-7b12"),
        ("AMD Ryzen 7 5800H with Radeon Graphics", "amd-ryzen-7-5800h"),
        ("NVIDIA A100-SXM4-80GB", "nvidia-a100-sxm4-80gb"),
        ("Tesla V100-SXM2-16GB", "tesla-v100-sxm2-16gb"),
        ("", "unknown"),
    ],
)
def test_a_model_name_becomes_a_short_readable_id(name, slug):
    assert hardware.slug(name) == slug


def test_a_gpu_id_holds_its_memory_where_the_name_does_not():
    assert hardware.gpu_id("Quadro M2200", 4096) == "quadro-m2200-4gb"
    assert hardware.gpu_id("NVIDIA A100-SXM4-80GB", 81920) == "nvidia-a100-sxm4-80gb"


def test_a_machine_id_is_its_cpus_then_its_kinds_of_gpu(monkeypatch):
    monkeypatch.setenv(hardware.TEST_CPU_NAME, "Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz")
    cores = os.cpu_count()
    assert hardware.machine_id([]) == f"intel-xeon-gold-6248-{cores}c"
    v100 = {"name": "Tesla V100-SXM2-32GB", "memory_mb": 32510}
    assert hardware.machine_id([v100, v100]) == (
        f"intel-xeon-gold-6248-{cores}c-2x-tesla-v100-sxm2-32gb"
    )
    assert hardware.identity("cpu")["id"] == f"intel-xeon-gold-6248-{cores}c"


def test_a_job_on_other_hardware_than_its_probe_fails_naming_both(monkeypatch):
    monkeypatch.setenv(hardware.TEST_CPU_NAME, "AMD EPYC 7B12")
    probe = hardware.identity("cpu")
    assert hardware.require_same("cpu", {"its probe": probe}) == probe
    assert hardware.require_same("cpu", {"an old probe": {}}) == probe  # recorded no identity
    monkeypatch.setenv(hardware.TEST_CPU_NAME, "Intel(R) Xeon(R) Gold 6248 CPU")
    with pytest.raises(hardware.Mismatch) as info:
        hardware.require_same("cpu", {"its probe": probe})
    said = str(info.value)
    assert said.startswith("this job landed on intel-xeon-gold-6248-") and "\n" not in said
    assert f"but its probe ran on {probe['id']}" in said


def test_steal_time_is_read_as_a_share_of_the_machines_cpu_between_two_readings(tmp_path):
    """/proc/stat's first line: user nice system idle iowait irq softirq steal guest ..."""
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 0 50 800 10 0 0 40 0 0\ncpu0 50 0 25 400 5 0 0 20 0 0\n")
    before = hardware.cpu_ticks(str(stat))
    assert before == (40, 1000)
    stat.write_text("cpu  130 0 60 830 10 0 0 70 0 0\n")  # 100 ticks later, 30 of them stolen
    assert hardware.stolen_percent(before, hardware.cpu_ticks(str(stat))) == 30.0
    assert hardware.stolen_percent(before, before) is None  # no tick between
    stat.write_text("cpu  100 0 50 800 10 0 0\n")  # a kernel that does not count steal
    assert hardware.cpu_ticks(str(stat)) is None
    assert hardware.cpu_ticks(str(tmp_path / "missing")) is None
    assert hardware.stolen_percent(None, before) is None


@pytest.mark.slow  # two Python processes, the parent holding 600 MB
def test_a_process_peak_is_its_own_not_the_one_it_was_started_from():
    """VmHWM starts afresh at exec; ru_maxrss keeps the parent's peak: a small child of a
    600 MB parent reads under 100 MB by peak_resident_mb and 600 MB or more by ru_maxrss."""
    import json
    import subprocess
    import sys

    child = ("import json, resource; from mptbench.core.hardware import peak_resident_mb; "
             "print(json.dumps([peak_resident_mb(), "
             "resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024]))")
    parent = ("import subprocess, sys; held = bytearray(600 << 20); "
              f"subprocess.run([sys.executable, '-c', {child!r}], check=True)")
    src = str(Path(hardware.__file__).resolve().parents[2])
    out = subprocess.run([sys.executable, "-c", parent], capture_output=True, text=True,
                         check=True, env=os.environ | {"PYTHONPATH": src}, timeout=60)
    own, inherited = json.loads(out.stdout)
    assert 0 < own < 100 and inherited >= 600
    assert hardware.peak_resident_mb(2**22 + 12345) is None  # no such process
    own, source = hardware.own_peak_mb()
    assert source == "VmHWM" and own == pytest.approx(hardware.peak_resident_mb(), rel=0.01)
