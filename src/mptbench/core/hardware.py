"""Which hardware a cell ran on, as a short, stable, readable id: part of every cell's key.

A device's id is its model's name, slugged, with what tells two of a kind apart where it
matters: a CPU's logical cores on the node (`amd-epyc-7b12-64c`), a GPU's memory where its
name does not hold it (`nvidia-a100-sxm4-80gb`, `quadro-m2200-4gb`). A machine's id is its
CPU's, followed by its GPUs' (`intel-xeon-gold-6248-40c-2x-tesla-v100-sxm2-32gb`). Both come
from /proc/cpuinfo and nvidia-smi (no framework import), so the workflow computes them when it
plans and every job again where it runs, and the two can be compared.

MPTBENCH_TEST_CPU_NAME replaces the CPU's model name, for tests only: it stands for another
machine on this one.
"""

from __future__ import annotations

import os
import platform
import re
import socket
from collections import Counter
from pathlib import Path
from typing import Any

from mptbench.core.devices import Device, gpu_facts

TEST_CPU_NAME = "MPTBENCH_TEST_CPU_NAME"
# What an id may look like: a path component and a Snakemake wildcard value.
PATTERN = r"[a-z0-9][a-z0-9._-]*"

# Words in a model name that tell nothing of the hardware.
_NOISE = re.compile(
    r"\((r|tm)\)|\b(cpu|processor|\d+-core|with radeon graphics)\b|@\s*[\d.]+\s*ghz",
    re.IGNORECASE,
)


def slug(text: str) -> str:
    """A model name as an id: lower case, its marks and clock left out, words joined by -."""
    words = re.sub(r"[^a-z0-9.]+", "-", _NOISE.sub(" ", text).lower())
    return re.sub(r"-+", "-", words).strip("-.") or "unknown"


def cpu_name() -> str:
    """The CPU's model name (/proc/cpuinfo; the platform's word elsewhere)."""
    if os.environ.get(TEST_CPU_NAME):
        return os.environ[TEST_CPU_NAME]
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and value.strip():
                return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def cpu_id() -> str:
    """The CPU's id: its model and the node's logical cores (all of them, not a job's share:
    two jobs on one node get one id)."""
    return device_id("cpu")


def gpu_id(name: str, memory_mb: int | None) -> str:
    """A GPU's id: its model, and its memory where the name does not say it already."""
    base = slug(name)
    if memory_mb and not re.search(r"\d+gb", base):
        base += f"-{round(memory_mb / 1024)}gb"
    return base


def _visible_index(index: int) -> int:
    """nvidia-smi's index of the job's `index`-th GPU (CUDA_VISIBLE_DEVICES maps them)."""
    visible = [v for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    if index < len(visible) and visible[index].strip().isdigit():
        return int(visible[index])
    return index


def _device(device: str) -> tuple[str, str | None]:
    """(id, model name) of a device as this process sees it (`cpu`, `gpu0`, ...): one read of
    /proc/cpuinfo or nvidia-smi."""
    index = Device(device).index
    if index is None:
        name = cpu_name()
        return f"{slug(name)}-{os.cpu_count() or 0}c", name
    facts = gpu_facts(_visible_index(index))
    if not facts:
        return f"unknown-gpu{index}", None
    return gpu_id(facts["name"], facts.get("memory_mb")), facts["name"]


def device_id(device: str) -> str:
    """The id of a device as this process sees it (`cpu`, `gpu0`, ...)."""
    return _device(device)[0]


def machine_id(gpus: list[dict[str, Any]] | None = None) -> str:
    """This machine's id: its CPU's, then each kind of GPU it has with their count
    (`gpus`: nvidia-smi's facts, read here when not given)."""
    if gpus is None:
        gpus = []
        index = 0
        while (facts := gpu_facts(index)) is not None:
            gpus.append(facts)
            index += 1
    kinds = Counter(gpu_id(g["name"], g.get("memory_mb")) for g in gpus)
    return "-".join([cpu_id(), *(f"{n}x-{kind}" for kind, n in kinds.items())])


def identity(device: str) -> dict[str, Any]:
    """What a job records of where it ran: its device's id and name, and the host."""
    found, name = _device(device)
    return {"id": found, "name": name, "host": socket.gethostname()}


def cpu_ticks(stat: str = "/proc/stat") -> tuple[int, int] | None:
    """(stolen, all) CPU ticks of this machine since boot, from /proc/stat's first line. On a
    virtual machine "stolen" (steal time) is time its virtual CPUs were ready to run and the
    hypervisor ran something else: a neighbour's load, invisible to the guest's own counters.
    None where there is no /proc/stat (not Linux)."""
    try:
        with open(stat) as lines:
            fields = [int(v) for v in lines.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    if len(fields) < 8:
        return None
    return fields[7], sum(fields)


def stolen_percent(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    """The share of the machine's CPU time, in percent, the hypervisor took between two
    cpu_ticks() readings; None without both or with no tick between them."""
    if before is None or after is None or after[1] <= before[1]:
        return None
    return 100 * (after[0] - before[0]) / (after[1] - before[1])


# Where own_peak_mb's figure came from, as a peak's source is named.
RESIDENT_PEAK = "VmHWM"
RUSAGE_PEAK = "ru_maxrss"


def peak_resident_mb(pid: int | str = "self") -> float | None:
    """A live process's own peak resident memory so far, in MB: the kernel's high-water mark
    (VmHWM, /proc/<pid>/status), which every peak, however brief, raises and exec starts
    afresh. getrusage's ru_maxrss does not start afresh at exec: a child's holds the peak of
    the process it was started from (an 814 MB parent's `python -c pass` reads 814 MB). None
    without /proc (not Linux)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    except (OSError, ValueError, IndexError):
        pass
    return None


def own_peak_mb() -> tuple[float, str]:
    """This process's own peak resident memory in MB and where it came from: VmHWM, or,
    without /proc, getrusage's ru_maxrss (an upper bound: it holds the peak of the process
    this one was started from too)."""
    own = peak_resident_mb()
    if own is not None:
        return own, RESIDENT_PEAK
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, RUSAGE_PEAK  # kB on Linux


class Mismatch(Exception):
    """A job landed on hardware other than what its sibling measurements ran on (one line)."""


def require_same(device: str, measured: dict[str, dict[str, Any] | None]) -> dict[str, Any]:
    """This job's identity on `device`, when it is the one each of `measured` (what, its
    identity) ran on; else Mismatch, naming both."""
    mine = identity(device)
    for what, theirs in measured.items():
        why = mismatch(mine, theirs, what)
        if why:
            raise Mismatch(why)
    return mine


def mismatch(mine: dict[str, Any] | None, theirs: dict[str, Any] | None, what: str) -> str | None:
    """One line when this job's device is not the one `what` was measured on; None when they
    agree, or when either does not say (records from before identities were kept)."""
    if not mine or not theirs or not mine.get("id") or not theirs.get("id"):
        return None
    if mine["id"] == theirs["id"]:
        return None
    return (
        f"this job landed on {mine['id']} (host {mine.get('host')}), but {what} ran on "
        f"{theirs['id']} (host {theirs.get('host')}): their figures are not comparable; give "
        "each kind of hardware its own sweep.targets entry, or rerun what was measured there"
    )
