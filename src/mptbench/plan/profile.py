"""A Snakemake profile used before its placeholders are filled in (profiles/slurm's CHANGE_ME
values) stops the run with one line naming the file and each key, not with the executor's
traceback from deep inside resource parsing."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

PLACEHOLDER = "CHANGE_ME"


def profile_dirs(argv: list[str], environ: dict[str, str] | None = None) -> list[str]:
    """The profiles a snakemake command line reads (--profile, --workflow-profile, or
    SNAKEMAKE_PROFILE), in the order given."""
    environ = os.environ if environ is None else environ
    found = []
    for i, arg in enumerate(argv):
        for flag in ("--profile", "--workflow-profile"):
            if arg == flag and i + 1 < len(argv):
                found.append(argv[i + 1])
            elif arg.startswith(f"{flag}="):
                found.append(arg.split("=", 1)[1])
    if not any(a in ("--profile",) or a.startswith("--profile=") for a in argv):
        if environ.get("SNAKEMAKE_PROFILE"):
            found.append(environ["SNAKEMAKE_PROFILE"])
    return found


# Profile sections whose values the command line can give instead:
# `--default-resources slurm_account=x` fills default-resources.slurm_account.
COMMAND_LINE = {
    "--default-resources": "default-resources",
    "--set-threads": "set-threads",
    "--set-resources": "set-resources",
}


def given(argv: list[str]) -> set[str]:
    """The profile keys this command line sets itself (as default-resources.NAME, ...)."""
    keys, section = set(), None
    for arg in argv[1:]:
        values = []
        if arg.startswith("-"):
            flag, _, inline = arg.partition("=")
            section = COMMAND_LINE.get(flag)
            values = [inline] if section and inline else []
        elif section:
            values = [arg]
        for value in values:
            keys.add(f"{section}.{value.split('=', 1)[0].replace(':', '.')}")
    return keys


def _placeholders(node: Any, path: str = "") -> list[str]:
    if isinstance(node, dict):
        return [k for key, value in node.items() for k in _placeholders(value, f"{path}{key}.")]
    if isinstance(node, list):
        return [k for item in node for k in _placeholders(item, path)]
    if isinstance(node, str) and PLACEHOLDER in node:
        return [path.rstrip(".")]
    return []


def unfilled(profile: str | Path, base: Path) -> tuple[Path, list[str]] | None:
    """(the profile's config file, its keys still holding CHANGE_ME), or None."""
    folder = Path(profile)
    if not folder.is_absolute():
        folder = base / folder
    config = folder / "config.yaml" if folder.is_dir() else folder
    if not config.is_file():
        return None
    try:
        keys = _placeholders(yaml.safe_load(config.read_text()) or {})
    except yaml.YAMLError:
        return None  # Snakemake says what is wrong with it
    return (config, keys) if keys else None


def check_profiles(
    argv: list[str], base: Path, environ: dict[str, str] | None = None
) -> str | None:
    """One line for the first profile that still has placeholders the command line does not
    fill in itself; None when all are filled."""
    on_command_line = given(argv)
    for profile in profile_dirs(argv, environ):
        found = unfilled(profile, base)
        keys = [k for k in found[1] if k not in on_command_line] if found else []
        if keys:
            config = found[0]
            try:
                shown = config.relative_to(base)
            except ValueError:
                shown = config
            return (
                f"{shown}: fill in {', '.join(keys)} for your site first "
                f"(still {PLACEHOLDER}; docs/guide/clusters.md#running-on-a-cluster-slurm)"
            )
    return None
