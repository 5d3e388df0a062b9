"""The commands mptbench prints for its user to type, written so that they run as printed from
the project root: README's quick start never activates its `.venv`, so a bare `snakemake` or
`pip` would be another one, or none. A program is named by its path in the environment of the
Python that runs mptbench (its bin/), relative to the working directory where it lies below.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from importlib import metadata
from pathlib import Path


def program(name: str) -> str:
    """`name` of this Python's environment as a user types it: `.venv/bin/snakemake` after
    README's quick start; `PYTHON -m name` where its bin/ has no such script."""
    found = Path(sys.executable).parent / name
    if not (found.is_file() and os.access(found, os.X_OK)):
        return f"{shlex.quote(_shown(Path(sys.executable)))} -m {name}"
    return shlex.quote(_shown(found))


def _shown(path: Path) -> str:
    # Not resolved: a venv's bin/python is a link to the interpreter it was made from, and
    # the link is what runs with the venv's packages.
    absolute = Path(os.path.abspath(path))
    try:
        return str(absolute.relative_to(Path.cwd()))
    except ValueError:
        return str(absolute)


def pip_install(target: str = ".") -> str:
    """The line that installs this checkout, or one of its extras (`.[gpu]`), here."""
    shown = target if target == "." else shlex.quote(target)
    return f"{program('pip')} install -e {shown}"


def extra_pin(extra: str, package: str) -> str | None:
    """The version an extra of the installed mptbench pins `package` at (pyproject.toml's)."""
    try:
        requirements = metadata.requires("mptbench") or []
    except metadata.PackageNotFoundError:
        return None
    for requirement in requirements:
        found = re.fullmatch(rf"{re.escape(package)}==([^;\s]+)\s*;\s*extra\s*==\s*"
                             rf"[\"']{re.escape(extra)}[\"']", requirement.strip())
        if found:
            return found.group(1)
    return None
