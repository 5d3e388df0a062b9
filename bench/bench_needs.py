"""What a machine needs for README's try-out: memory at its peak, disk, and the environment.

Runs README's try-out (`snakemake --cores 2 --config experiment=smoke`) on a fresh copy of this
checkout while a sampler reads, twice a second, the proportional set size (PSS: shared pages
counted once across processes) of Snakemake and every process under it, and prints the peak
of their sum and of the largest one alone, the wall time, the steal meanwhile, what the run
left on disk, and the size of the environment that ran it (this Python's prefix).

    python bench/bench_needs.py
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
from common import ROOT, WORK, Steal, checkout, machine


def folder_bytes(folder: Path) -> int:
    """Bytes of the files under `folder` (a link counted as the link)."""
    return sum(p.lstat().st_size for p in folder.rglob("*") if p.is_file() or p.is_symlink())


class Sampler(threading.Thread):
    """The peak, over samples, of the PSS summed over a process and its descendants, and of
    the largest single process."""

    def __init__(self, pid: int, every_s: float = 0.5):
        super().__init__(daemon=True)
        self.root, self.every_s = psutil.Process(pid), every_s
        self.peak_sum = self.peak_one = 0
        self.stopped = threading.Event()

    def sample(self) -> None:
        sizes = []
        for process in [self.root, *self.root.children(recursive=True)]:
            try:
                sizes.append(process.memory_full_info().pss)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        self.peak_sum = max(self.peak_sum, sum(sizes))
        self.peak_one = max(self.peak_one, max(sizes, default=0))

    def run(self) -> None:
        while not self.stopped.is_set():
            try:
                self.sample()
            except psutil.NoSuchProcess:
                return
            self.stopped.wait(self.every_s)


def tryout(target: Path) -> dict:
    """README's try-out in `target`, sampled; its figures."""
    command = [str(Path(sys.executable).with_name("snakemake")), "--cores", "2",
               "--config", "experiment=smoke"]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    steal, began = Steal(), time.monotonic()
    with open(target / "last_run.log", "w") as log:
        child = subprocess.Popen(command, cwd=target, env=env, stdout=log, stderr=log)
        sampler = Sampler(child.pid)
        sampler.start()
        code = child.wait()
        sampler.stopped.set()
    return {"returncode": code, "wall_s": time.monotonic() - began, "steal": steal.percent(),
            "peak_sum": sampler.peak_sum, "peak_one": sampler.peak_one,
            "left": {name: folder_bytes(target / name) for name in ("resources", "results")}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=WORK / "needs")
    args = parser.parse_args(argv)
    print(f"CPU: {machine()}; {psutil.virtual_memory().total / 2**30:.1f} GiB of memory",
          flush=True)
    found = tryout(checkout(ROOT, args.workdir / "checkout", fresh=True))
    gb = 1e9
    print(f"try-out: exit {found['returncode']}, {found['wall_s']:.0f} s, steal "
          f"{found['steal']:.1f}%; peak memory (PSS) {found['peak_sum'] / gb:.2f} GB in all, "
          f"{found['peak_one'] / gb:.2f} GB the largest process")
    print("left on disk: " + ", ".join(f"{name}/ {size / gb:.2f} GB ({size:,} bytes)"
                                       for name, size in found["left"].items()))
    size = folder_bytes(Path(sys.prefix))
    print(f"the environment that ran it ({Path(sys.prefix).name}/): {size / gb:.2f} GB "
          f"({size:,} bytes)")
    return found["returncode"]


if __name__ == "__main__":
    sys.exit(main())
