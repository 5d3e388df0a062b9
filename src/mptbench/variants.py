"""TensorFlow variants: each in its own verified environment, and the source build's checks.

A variant without a wheel of its own (pypi, pypi_onednn, pypi_xla) runs in the environment
that runs the workflow, once its TensorFlow matches the pin. A variant with a wheel (given,
or built by the build_tensorflow rule) gets a venv of its own: envs/requirements-train.txt,
then the wheel. Either way the environment is verified by starting its TensorFlow and
reading which CPU instructions it says it does not use.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from importlib import metadata
from pathlib import Path

from mptbench.dataset import write_json

SRC = Path(__file__).resolve().parents[1]
PINNED_TENSORFLOW = "2.21.0"
PROBE = (
    "import json; from mptbench.cell import import_tensorflow; "
    "tf, keras, facts = import_tensorflow(); "
    "print('MPTBENCH ' + json.dumps("
    "dict(facts, tensorflow=tf.__version__, keras=keras.__version__)))"
)


class VariantError(RuntimeError):
    """A variant that cannot be set up as configured; the message is one line."""


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def probe(python: str, env: dict[str, str], log=print) -> dict:
    """Start TensorFlow in `python` with the variant's environment; what it says of itself."""
    full_env = dict(os.environ, **env, CUDA_VISIBLE_DEVICES="")
    full_env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), full_env.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [python, "-c", PROBE], env=full_env, capture_output=True, text=True, timeout=600
    )
    log(done.stderr[-4000:])
    lines = [line for line in done.stdout.splitlines() if line.startswith("MPTBENCH ")]
    if done.returncode != 0 or not lines:
        raise VariantError(
            f"TensorFlow does not start in {python}: {done.stderr.strip().splitlines()[-1:]}"
        )
    return json.loads(lines[-1][len("MPTBENCH ") :])


def _run(command: list[str], log) -> None:
    log("+ " + " ".join(command))
    done = subprocess.run(command, capture_output=True, text=True)
    log(done.stdout[-4000:] + done.stderr[-4000:])
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise VariantError(f"{' '.join(command[:4])} ... failed: {tail}")


def make_environment(
    name: str, variant: dict, wheel: str | None, venvs: Path, requirements: Path, log=print
) -> dict:
    """Set up (or reuse) the variant's environment and return its verified manifest."""
    manifest: dict = {"variant": name, "env": variant.get("env") or {}}
    if wheel:
        wheel_path = Path(wheel)
        if not wheel_path.is_file() or wheel_path.suffix != ".whl":
            raise VariantError(f"variant.{name}.wheel: {wheel} is not a wheel file")
        venv = venvs / name
        shutil.rmtree(venv, ignore_errors=True)  # a half-made venv from an earlier run
        _run([sys.executable, "-m", "venv", str(venv)], log)
        python = str(venv / "bin" / "python")
        # The wheel with its own dependencies, under the project's pins.
        pip = [python, "-m", "pip", "install", "--quiet"]
        _run([*pip, "-r", str(requirements), str(wheel_path)], log)
        manifest.update(
            python=python, wheel=wheel_path.name, wheel_sha256=sha256_of(wheel_path), venv=str(venv)
        )
    else:
        installed = metadata.version("tensorflow")
        if installed != PINNED_TENSORFLOW:
            raise VariantError(
                f"variant {name} reuses this environment, whose TensorFlow is {installed}, "
                f"not the pinned {PINNED_TENSORFLOW}; reinstall with pip install -e ."
            )
        manifest.update(
            python=sys.executable, wheel=f"tensorflow=={installed} (PyPI)", wheel_sha256=None
        )
    facts = probe(manifest["python"], {str(k): str(v) for k, v in manifest["env"].items()}, log)
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


def _reachable(url: str, timeout: float = 10) -> str | None:
    """None when `url` answers; else why not, in a few words."""
    try:
        urllib.request.build_opener().open(
            urllib.request.Request(url, method="HEAD"), timeout=timeout
        ).close()
        return None
    except urllib.error.HTTPError:
        return None  # the host answered
    except (urllib.error.URLError, OSError) as exc:
        return str(getattr(exc, "reason", exc))


def preflight(build: dict, tools: Path, variant: str, log=print) -> str:
    """Check what a source build needs before it starts; return the bazelisk to run.

    Everything missing is named in one message, with how to supply a prebuilt wheel instead.
    """
    missing = []
    if not shutil.which("git"):
        missing.append("git (not on PATH)")
    bazelisk = shutil.which("bazelisk") or shutil.which("bazel")
    local = tools / "node_modules" / ".bin" / "bazelisk"
    if not bazelisk and local.exists():
        bazelisk = str(local)
    offline = _reachable(build["repository"])
    if offline:
        missing.append(f"network access to {build['repository']} ({offline})")
    if not bazelisk:
        if not shutil.which("npm"):
            missing.append("bazelisk (not on PATH, and no npm to install @bazel/bazelisk)")
        elif not offline:
            log("installing bazelisk from the npm package @bazel/bazelisk")
            done = subprocess.run(
                ["npm", "install", "--prefix", str(tools), "@bazel/bazelisk"],
                capture_output=True,
                text=True,
            )
            if done.returncode != 0 or not local.exists():
                missing.append(
                    f"bazelisk (npm install @bazel/bazelisk failed: {done.stderr.strip()[-200:]})"
                )
            bazelisk = str(local)
    if missing:
        raise VariantError(
            f"cannot build TensorFlow from source here: missing {'; '.join(missing)}. "
            f"Supply a prebuilt wheel instead: --config 'overrides=[\"variant.{variant}.wheel="
            f"/path/to/{build['wheel_name']}-{PINNED_TENSORFLOW}-....whl\"]'"
        )
    return str(bazelisk)


def collect_wheel(source_tree: Path, dest_dir: Path, manifest: Path) -> dict:
    """Copy the wheel Bazel built into resources/ and describe it."""
    built = sorted(
        (source_tree / "bazel-bin/tensorflow/tools/pip_package/wheel_house").glob("*.whl")
    )
    if not built:
        raise VariantError(
            f"no wheel in {source_tree}/bazel-bin/tensorflow/tools/pip_package/wheel_house"
        )
    dest_dir.mkdir(parents=True, exist_ok=True)
    wheel = dest_dir / built[-1].name
    shutil.copyfile(built[-1], wheel)
    data = {"wheel": str(wheel), "sha256": sha256_of(wheel)}
    write_json(manifest, data)
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Set up and verify TensorFlow variants.")
    sub = parser.add_subparsers(dest="command", required=True)
    env = sub.add_parser("env", help="build or reuse a variant's environment; write its manifest")
    env.add_argument("--name", required=True)
    env.add_argument("--variant", required=True, help="the variant's config (JSON)")
    env.add_argument(
        "--wheel-manifest", default="", help="the build rule's manifest, if it built one"
    )
    env.add_argument("--venvs", required=True)
    env.add_argument("--requirements", required=True)
    env.add_argument("--output", required=True)
    pre = sub.add_parser("preflight", help="check a source build can run; print the bazelisk path")
    pre.add_argument("--name", required=True)
    pre.add_argument("--variant", required=True)
    pre.add_argument("--tools", required=True)
    col = sub.add_parser("collect", help="copy the built wheel and write its manifest")
    col.add_argument("--source-tree", required=True)
    col.add_argument("--dest-dir", required=True)
    col.add_argument("--output", required=True)
    args = parser.parse_args(argv)

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    try:
        if args.command == "env":
            variant = json.loads(args.variant)
            wheel = variant.get("wheel")
            if not wheel and args.wheel_manifest:
                wheel = json.loads(Path(args.wheel_manifest).read_text())["wheel"]
            manifest = make_environment(
                args.name, variant, wheel, Path(args.venvs), Path(args.requirements), log
            )
            write_json(args.output, manifest)
        elif args.command == "preflight":
            print(preflight(json.loads(args.variant)["build"], Path(args.tools), args.name, log))
        else:
            collect_wheel(Path(args.source_tree), Path(args.dest_dir), Path(args.output))
    except VariantError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
