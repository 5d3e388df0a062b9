"""A TensorFlow source build: what it needs before it starts, and the wheel it leaves."""

from __future__ import annotations

import shutil
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

from mptbench.jobs.environment import PINNED_TENSORFLOW, VariantError


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


def _install_bazelisk(tools: Path, local: Path, log) -> str | None:
    """bazelisk from the npm package @bazel/bazelisk; None when that worked, else why not."""
    log("installing bazelisk from the npm package @bazel/bazelisk")
    done = subprocess.run(
        ["npm", "install", "--prefix", str(tools), "@bazel/bazelisk"],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0 or not local.exists():
        return f"bazelisk (npm install @bazel/bazelisk failed: {done.stderr.strip()[-200:]})"
    return None


def preflight(build: dict, tools: Path, variant: str, log=print) -> str:
    """Check what a source build needs before it starts; return the bazelisk to run.

    Everything missing is named in one message, with how to supply a prebuilt wheel instead.
    """
    missing = [] if shutil.which("git") else ["git (not on PATH)"]
    local = tools / "node_modules" / ".bin" / "bazelisk"
    bazelisk = shutil.which("bazelisk") or shutil.which("bazel")
    bazelisk = bazelisk or (str(local) if local.exists() else None)
    offline = _reachable(build["repository"])
    if offline:
        missing.append(f"network access to {build['repository']} ({offline})")
    if not bazelisk and not shutil.which("npm"):
        missing.append("bazelisk (not on PATH, and no npm to install @bazel/bazelisk)")
    elif not bazelisk and not offline:
        failed = _install_bazelisk(tools, local, log)
        missing += [failed] if failed else []
        bazelisk = str(local)
    if missing:
        raise VariantError(
            f"cannot build TensorFlow from source here: missing {'; '.join(missing)}. "
            f"Supply a prebuilt wheel instead: --config 'overrides=[\"variant.{variant}.wheel="
            f"/path/to/{build['wheel_name']}-{PINNED_TENSORFLOW}-....whl\"]'"
        )
    return str(bazelisk)


def built_wheel(wheels: Path) -> Path:
    """The one wheel the build rule left in its folder."""
    found = sorted(Path(wheels).glob("*.whl"))
    if len(found) != 1:
        raise VariantError(f"{wheels}: expected one built wheel, found {len(found)}")
    return found[0]
