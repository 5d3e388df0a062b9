"""What several benchmarks share: the machine they ran on, a fixture in Imagenette's layout and
its cache, a run's model and input as the train job builds them, a copy of a checkout, a
workflow run in it and what the run wrote (its summary and run records), a neighbour whose load
comes and goes, and figures over processes through the production statistics (core/stats.py).

A script imports it first (`from common import ...`: the script's folder is on the path), which
puts this checkout's src/ on the path too, so a checkout without `pip install -e .` works.

    python bench/common.py --neighbour 1 20 90 20 90 LOG   # what Neighbour starts
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "src") not in sys.path:  # a checkout without `pip install -e .` works too
    sys.path.insert(0, str(ROOT / "src"))
WORK = ROOT / "bench" / ".work"
from mptbench.plan.layout import WORKFLOW_FILES as WORKFLOW  # noqa: E402 (after the path)


def machine() -> str:
    """'Intel(R) Xeon(R) Processor, 2 cores, AMX-BF16': the CPU and its fast bfloat16."""
    from mptbench.engine.fingerprint import cpu_info

    cpu = cpu_info()
    flags = set(cpu["flags"])
    fast = ("AMX-BF16" if "amx_bf16" in flags else
            "AVX512_BF16, no AMX" if "avx512_bf16" in flags else "no native bfloat16")
    return f"{cpu['model']}, {cpu['logical_cores']} cores, {fast}"


class Steal:
    """The share of the machine's CPU the hypervisor gave to other guests since `start`."""

    def __init__(self):
        from mptbench.core import hardware

        self._hardware = hardware
        self._ticks = hardware.cpu_ticks()

    def percent(self) -> float | None:
        return self._hardware.stolen_percent(self._ticks, self._hardware.cpu_ticks())


# ---------------------------------------------------------------- data


def _archive(work: Path, image_size: int, train_per_class: int, val_per_class: int) -> Path:
    """An archive in Imagenette's layout, its images larger than `image_size` (built once)."""
    from mptbench.data.fixtures import make_imagenette_archive

    work = work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    short_side = max(96, image_size + 16)  # the cache is built by downscaling, as real data is
    archive = work / f"imagenette-{train_per_class}x{val_per_class}x{short_side}.tgz"
    if not archive.exists():
        make_imagenette_archive(archive, train_per_class=train_per_class,
                                val_per_class=val_per_class, short_side=short_side)
    return archive


def fixture(work: Path, image_size: int, train_per_class: int, val_per_class: int) -> Path:
    """An archive in Imagenette's layout and its tfds cache at `image_size` (each built once
    under `work`): the prepared JSON a cell reads."""
    archive = _archive(work, image_size, train_per_class, val_per_class)
    work, stem = archive.parent, archive.name.removesuffix(".tgz")
    prepared = work / f"prepared-{stem}-{image_size}px.json"
    if not prepared.exists():
        code = ("import sys; from mptbench.data.cache import prepare; "
                "from mptbench.core.files import write_json; "
                "write_json(sys.argv[4], prepare(sys.argv[1], sys.argv[2], int(sys.argv[3]), "
                "sys.argv[5]))")
        subprocess.run([sys.executable, "-c", code, str(archive), stem, str(image_size),
                        str(prepared), str(work / "tfds")], check=True, timeout=1800)
    return prepared


def image_folder(work: Path, image_size: int, train_per_class: int, val_per_class: int) -> Path:
    """The same archive as `fixture`'s, unpacked as a user keeps images: <folder>/train/<class>/
    and <folder>/val/<class>/ (built once)."""
    import tarfile

    archive = _archive(work, image_size, train_per_class, val_per_class)
    folder = archive.with_suffix(".folder")
    if not (folder / "imagenette2-320" / "val").is_dir():
        with tarfile.open(archive) as tar:
            tar.extractall(folder, filter="data")
    return folder / "imagenette2-320"


def user_datasets(tf, keras, folder: Path, image_size: int, batch_size: int, seed: int,
                  form: str = "as_written"):
    """A user's own input from an image folder, as Keras' guides write it: (train, validation,
    steps_per_epoch for fit). `form`: as_written (fit makes a new iterator each epoch), repeat
    (`.repeat()` and steps_per_epoch: one iterator) or no_autotune (tf.data's autotuning off)."""
    images = {"image_size": (image_size, image_size), "batch_size": None, "seed": seed,
              "label_mode": "int"}
    train = keras.utils.image_dataset_from_directory(folder / "train", shuffle=True, **images)
    val = keras.utils.image_dataset_from_directory(folder / "val", shuffle=False, **images)
    count = int(train.cardinality())

    def scale(x, y):
        return tf.cast(x, tf.float32) / 255.0, y

    auto = tf.data.AUTOTUNE
    train = train.cache().shuffle(max(1, count // batch_size), seed=seed).batch(batch_size)
    train = train.map(scale, num_parallel_calls=auto).prefetch(auto)
    val = val.cache().batch(batch_size).map(scale, num_parallel_calls=auto).prefetch(auto)
    if form == "repeat":
        return train.repeat(), val, count // batch_size + (count % batch_size > 0)
    if form == "no_autotune":
        options = tf.data.Options()
        options.autotune.enabled = False
        train, val = train.with_options(options), val.with_options(options)
    return train, val, None


def compose_runs(model: str, image_size: int, policies: list[str], batch_size: int,
                 overrides: list[str] = (), name: str = "bench"):
    """A comparison group's runs as the workflow composes them (the benchmark experiment)."""
    from mptbench.plan import Cell, compose_config, run_config

    cfg = compose_config(ROOT / "conf", "benchmark", [
        f"name={name}", f"dataset.image_size={image_size}", f"model=[{model}]",
        f"policy=[{','.join(policies)}]", *overrides,
    ])
    return [run_config(cfg, Cell("local", model, "tensorflow", "pypi", "cpu", p, batch_size))
            for p in policies]


def run_files(runs, folder: Path) -> dict[str, Path]:
    """Each run's JSON in `folder`, by policy: what a fresh process reads to train it."""
    from mptbench.core.contract import encode

    folder.mkdir(parents=True, exist_ok=True)
    files = {}
    for run in runs:
        files[run.policy.name] = folder / f"run-{run.policy.name}.json"
        files[run.policy.name].write_text(json.dumps(encode(run)))
    return files


def job_env(run) -> dict[str, str]:
    """What the supervisor gives its trainer (jobs/launcher.py): a fresh process starts from it."""
    from mptbench.jobs.launcher import environment

    return environment(run.variant.env, run.device.name, run.backend.name)


# ---------------------------------------------------------------- a run in a plain process


def load_run(run_json: str | Path):
    """A run as run_files wrote it."""
    from mptbench.core.contract import Run, decode

    return decode(Run, json.loads(Path(run_json).read_text()))


def job_model(keras, run, prepared: dict, steps_per_execution: int | None = None):
    """The run's model as the train job builds it (engine/models.py), from the run's seed,
    in a process that imported Keras itself (no engine start); steps per execution the run's
    block_steps unless given."""
    from mptbench.engine.models import build_model, jit_setting

    size, classes = prepared["image_size"], len(prepared["classes"])
    keras.utils.set_random_seed(run.seed)
    return build_model(run.model, (size, size, 3), classes, run.policy,
                       jit_setting(run.variant.jit_compile),
                       run.block_steps if steps_per_execution is None else steps_per_execution)


def job_input(tf, run, prepared: dict, split: str = "train"):
    """The run's tf.data input of `split` as the train job reads it (engine/pipeline.py)."""
    from mptbench.engine.pipeline import input_pipeline

    classes = len(prepared["classes"])
    return input_pipeline(tf, prepared, split, run.cell.batch_size, run.dataset.input, run.seed,
                          training=split == "train",
                          one_hot_classes=classes if run.model.one_hot_labels else 0)


# ---------------------------------------------------------------- the workflow in a copy


def checkout(source: Path, target: Path, fresh: bool = False) -> Path:
    """A copy of `source`'s workflow in `target`: its results, if any, kept, or with `fresh`
    none (the copy made anew)."""
    if fresh:
        shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True, exist_ok=True)
    for name in WORKFLOW:
        src, dst = source / name, target / name
        if dst.is_dir():
            shutil.rmtree(dst)
        if src.is_dir():
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
        elif src.exists():
            shutil.copy(src, dst)
    return target


def snakemake(folder: Path, overrides: list[str] = (), experiment: str | None = "benchmark",
              extra: list[str] = (), cores: int | str = 2, hide_gpus: bool = True,
              show: bool = False) -> subprocess.CompletedProcess:
    """`snakemake --cores N` in `folder` with these Hydra overrides, `extra` before its
    --config (targets, --until, ...); without `experiment`, the workflow's default one. The
    GPUs are hidden from it unless `hide_gpus` is false; with `show`, the command is printed
    first. Its output is kept in <folder>/last_run.log."""
    command = [str(Path(sys.executable).with_name("snakemake")), "--cores", str(cores), *extra]
    config = [f"experiment={experiment}"] if experiment else []
    if overrides:
        config.append("overrides=" + json.dumps(list(overrides)))
    if config:
        command += ["--config", *config]
    if show:
        print("+ " + " ".join(command), flush=True)
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""} if hide_gpus else None
    done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True)
    (folder / "last_run.log").write_text(done.stdout + done.stderr)
    return done


def summary(folder: Path, name: str):
    """The report's summary.csv of experiment `name` in the copy `folder` (a DataFrame)."""
    import pandas as pd

    return pd.read_csv(folder / "results" / name / "report" / "summary.csv")


def records(folder: Path, name: str) -> list[dict]:
    """The run records of experiment `name` in the copy `folder`, in the order of their paths."""
    return [json.loads(path.read_text())
            for path in sorted((folder / "results" / name / "runs").rglob("*.json"))]


def interval(row, prefix: str, digits: int = 2) -> str:
    """' (low-high)' of a summary row's `<prefix>_ci_low` and `_ci_high`; '' without one."""
    low, high = row.get(f"{prefix}_ci_low"), row.get(f"{prefix}_ci_high")
    if low is None or low != low:
        return ""
    return f" ({low:.{digits}f}-{high:.{digits}f})"


# ---------------------------------------------------------------- a neighbour


class Neighbour:
    """A process whose load comes and goes: `threads` threads of float32 matmuls for a busy
    spell of `busy` seconds (drawn between the two), then nothing for `idle` seconds, over and
    over, each spell written to `log` (start, end, busy or idle) so a figure can say how much
    of its time the neighbour was busy. Without threads, nothing is started."""

    def __init__(self, threads: int, log: Path, busy=(20.0, 90.0), idle=(20.0, 90.0)):
        self.threads, self.log, self.busy, self.idle = threads, log, busy, idle
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> Neighbour:
        if self.threads:
            command = [sys.executable, __file__, "--neighbour", str(self.threads),
                       *map(str, (*self.busy, *self.idle)), str(self.log)]
            env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
            self.process = subprocess.Popen(command, env=env)
        return self

    def __exit__(self, *exc) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=30)

    def busy_share(self, start: float, end: float) -> float | None:
        """The share of [start, end] (time.time()) the neighbour was busy."""
        return busy_share(self.log, start, end) if self.threads else None


def busy_share(log: Path, start: float, end: float) -> float | None:
    """The share of [start, end] a neighbour's `log` says it was busy (a spell still going
    when the log was read counts up to then)."""
    if not log.exists() or end <= start:
        return None
    busy = 0.0
    for line in log.read_text().splitlines():
        a, b, kind = line.split()
        b = time.time() if b == "-" else float(b)
        if kind == "busy":
            busy += max(0.0, min(b, end) - max(float(a), start))
    return busy / (end - start)


def _neighbour(threads: int, busy: tuple[float, float], idle: tuple[float, float],
               log: Path) -> None:
    import threading

    import numpy as np

    draw = random.Random()
    stop = threading.Event()

    def work():
        a = np.random.default_rng(0).random((512, 512), dtype=np.float32)
        while not stop.is_set():
            a = (a @ a) / 512.0

    while True:
        spell = draw.uniform(*busy)
        stop.clear()
        workers = [threading.Thread(target=work, daemon=True) for _ in range(threads)]
        started = time.time()
        _spell(log, started, "busy")
        for worker in workers:
            worker.start()
        time.sleep(spell)
        stop.set()
        for worker in workers:
            worker.join()
        _spell(log, started, "busy", time.time())
        started = time.time()
        time.sleep(draw.uniform(*idle))


def _spell(log: Path, started: float, kind: str, ended: float | None = None) -> None:
    """A spell's line: '<start> - busy' while it lasts, then '<start> <end> busy'."""
    lines = log.read_text().splitlines() if log.exists() else []
    if ended is not None and lines and lines[-1] == f"{started:.1f} - {kind}":
        lines.pop()
    lines.append(f"{started:.1f} {'-' if ended is None else f'{ended:.1f}'} {kind}")
    log.write_text("\n".join(lines) + "\n")


# ---------------------------------------------------------------- figures


def over(values: list[float], first: int | None = None):
    """exp(mean log) of positive figures, one per process or cycle, with its t interval
    (core/stats.py); None without any."""
    from mptbench.core import stats

    values = [v for v in values if v and v > 0 and math.isfinite(v)]
    return stats.of_logs([math.log(v) for v in values], first=first) if values else None


def shown(estimate, digits: int = 3) -> str:
    """'1.02 (0.98-1.06)'."""
    if estimate is None:
        return "-"
    if estimate.low is None:
        return f"{estimate.value:.{digits}f} (no interval)"
    return f"{estimate.value:.{digits}f} ({estimate.low:.{digits}f}-{estimate.high:.{digits}f})"


def holds(estimate, value: float) -> bool:
    return estimate is not None and estimate.low is not None and (
        estimate.low <= value <= estimate.high)


def append_jsonl(path: Path, row: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as sink:
        sink.write(json.dumps(row) + "\n")


def read_jsonl(path: Path) -> list[dict]:
    """The rows append_jsonl wrote (none where the file is not there yet)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="a neighbour whose load comes and goes")
    parser.add_argument("--neighbour", nargs=6, required=True,
                        metavar=("THREADS", "BUSY_MIN", "BUSY_MAX", "IDLE_MIN", "IDLE_MAX", "LOG"))
    found = parser.parse_args().neighbour
    _neighbour(int(found[0]), (float(found[1]), float(found[2])),
               (float(found[3]), float(found[4])), Path(found[5]))
