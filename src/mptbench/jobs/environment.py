"""A variant's environment: this one (PyPI wheel) or a venv with its own wheel, verified.

A variant without a wheel of its own (pypi, pypi_onednn, pypi_xla) runs in the environment
that runs the workflow, once its TensorFlow matches the pin. A variant with a wheel (given,
or built by the build_tensorflow rule) gets a venv of its own: envs/requirements-train.txt,
then the wheel. Either way the environment is verified by starting its TensorFlow and
reading which CPU instructions it says it does not use.

Before a run's first job, each backend the grid times on a GPU is started with that GPU
visible (`gpu_problems`): a framework without its CUDA libraries stops the run in one line
then, not after the download and the cache, in the first GPU job.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from importlib import metadata
from pathlib import Path

from mptbench.core.commands import pip_install
from mptbench.core.contract import EnvironmentFacts, EnvironmentJob
from mptbench.core.files import read_json, sha256_of
from mptbench.jobs.launcher import Engine, EngineFailed, environment


def pinned(package: str) -> str:
    """The version pyproject.toml pins `package` at, as this installed mptbench declares it."""
    for requirement in metadata.requires("mptbench") or []:
        name, _, version = requirement.partition("==")
        if name.strip() == package and ";" not in requirement:
            return version.strip()
    raise LookupError(f"mptbench pins no {package}: reinstall with {pip_install()}")


PINNED_TENSORFLOW = pinned("tensorflow")
# What a run records of the environment it ran in.
INSTALLED_KEYS = (
    "wheel",
    "wheel_sha256",
    "tensorflow",
    "verified",
    "warning",
    "tf_unused_cpu_instructions",
)


class VariantError(RuntimeError):
    """A variant that cannot be set up as configured; the message is one line."""


def interpreter(env_manifest: str | None) -> tuple[str, dict]:
    """The variant environment's Python, and what to record of its TensorFlow."""
    if not env_manifest:
        return sys.executable, {}
    manifest = read_json(env_manifest)
    return manifest["python"], {k: manifest.get(k) for k in INSTALLED_KEYS}


def startup_of(python: str, env: dict[str, str]) -> dict:
    """Start TensorFlow in `python` with the variant's environment; what it says of itself."""
    engine = Engine(python, environment(env, "cpu"))
    with tempfile.TemporaryDirectory() as tmp:
        try:
            facts = engine.result(EnvironmentJob(out=str(Path(tmp) / "facts.json")),
                                  EnvironmentFacts)
        except EngineFailed as exc:
            raise VariantError(f"TensorFlow does not start in {python}: {exc}") from None
    return asdict(facts)


def gpu_problems(checks: list[tuple[str, str, str | None, dict]], log: Path) -> list[str]:
    """One line for each check whose backend sees no GPU: a check is (backend, GPU, the
    variant's environment manifest or None for this environment, the variant's variables).
    They start side by side (a framework's start is seconds of one core); their output goes
    to `log`, whose path a failure without a line of its own names."""
    def problem(check) -> str | None:
        backend, gpu, manifest, env = check
        python, _ = interpreter(manifest)
        engine = Engine(python, environment(env, gpu, backend))
        with tempfile.TemporaryDirectory() as tmp:
            job = EnvironmentJob(out=str(Path(tmp) / "facts.json"), backend=backend, gpu=gpu)
            try:
                engine.result(job, EnvironmentFacts)
            except EngineFailed as exc:
                return str(exc).replace("see the log above", f"see {log}")
        return None

    if not checks:
        return []
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as out, contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        with ThreadPoolExecutor(max_workers=len(checks)) as pool:
            found = list(pool.map(problem, checks))
    return [line for line in found if line]


def _run(command: list[str], log) -> None:
    log("+ " + " ".join(command))
    done = subprocess.run(command, capture_output=True, text=True)
    log(done.stdout[-4000:] + done.stderr[-4000:])
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise VariantError(f"{' '.join(command[:4])} ... failed: {tail}")


def _own_venv(name: str, wheel: str, venvs: Path, requirements: Path, log) -> dict:
    """A fresh venv with the project's pins and the variant's wheel."""
    wheel_path = Path(wheel)
    if not wheel_path.is_file() or wheel_path.suffix != ".whl":
        raise VariantError(f"variant.{name}.wheel: {wheel} is not a wheel file")
    venv = venvs / name
    shutil.rmtree(venv, ignore_errors=True)  # a half-made venv from an earlier run
    _run([sys.executable, "-m", "venv", str(venv)], log)
    python = str(venv / "bin" / "python")
    # The wheel with its own dependencies, under the project's pins. Not byte-compiled: the
    # verification below compiles what TensorFlow imports, and the rest is never read.
    _run([python, "-m", "pip", "install", "--quiet", "--no-compile", "-r", str(requirements),
          str(wheel_path)], log)
    return {
        "python": python,
        "wheel": wheel_path.name,
        "wheel_sha256": sha256_of(wheel_path),
        "venv": str(venv),
    }


def _this_environment(name: str) -> dict:
    installed = metadata.version("tensorflow")
    if installed != PINNED_TENSORFLOW:
        raise VariantError(
            f"variant {name} reuses this environment, whose TensorFlow is {installed}, "
            f"not the pinned {PINNED_TENSORFLOW}; reinstall with {pip_install()}"
        )
    return {
        "python": sys.executable,
        "wheel": f"tensorflow=={installed} (PyPI)",
        "wheel_sha256": None,
    }


def make_environment(
    name: str, variant: dict, wheel: str | None, venvs: Path, requirements: Path, log=print
) -> dict:
    """Set up (or reuse) the variant's environment and return its verified manifest."""
    manifest: dict = {"variant": name, "env": variant.get("env") or {}}
    if wheel:
        manifest.update(_own_venv(name, wheel, venvs, requirements, log))
    else:
        manifest.update(_this_environment(name))
    facts = startup_of(manifest["python"], manifest["env"])
    manifest.update(facts)
    expected = (variant.get("build") or {}).get("expect_used") or []
    still_unused = sorted(set(expected) & set(facts["tf_unused_cpu_instructions"]))
    manifest["verified"] = not still_unused
    if still_unused:
        manifest["warning"] = (
            "not the build you asked for: TensorFlow still lists "
            f"{', '.join(still_unused)} as unused"
        )
        log(f"warning: {manifest['warning']}")
    return manifest
