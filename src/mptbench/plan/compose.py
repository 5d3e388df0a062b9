"""Compose the Hydra configuration (conf/) from an experiment and overrides, then check it.

`snakemake --config` takes the experiment, the config's own groups and keys as people type
them (`policy=[float32,mixed_bfloat16] model=resnet50 sweep="{batch_sizes: [32, 64]}"`),
and Hydra override strings (`overrides=[...]`) for anything else.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mptbench.core import isa, policies
from mptbench.plan import checks, schema
from mptbench.plan.errors import ConfigError

# What `snakemake --config KEY=VALUE` may set besides the config's own top-level keys.
WORKFLOW_KEYS = ("experiment", "overrides")
# A value Hydra's override grammar reads as one plain word (anything else is quoted).
_PLAIN = re.compile(r"[\w.:/+@~-]*")


def allowed_keys() -> list[str]:
    return [*WORKFLOW_KEYS, *schema.top_level_keys()]


def check_workflow_config(config: dict[str, Any]) -> None:
    """Snakemake's own --config keys: a misspelt one would otherwise be silently ignored."""
    allowed = allowed_keys()
    for key in config:
        if key not in allowed:
            raise ConfigError(
                f"--config {key}=...: unknown key '{key}' (allowed: {', '.join(allowed)})"
            )


def _hydra_value(value: Any) -> str:
    """A value as Hydra's override grammar writes it."""
    if isinstance(value, list | tuple):
        return "[" + ",".join(_hydra_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{_hydra_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, bool):
        return str(value).lower()
    if value is None:
        return "null"
    text = str(value)
    if _PLAIN.fullmatch(text) and text:
        return text
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _as_overrides(key: str, value: Any) -> list[str]:
    """`policy=[a,b]` picks options of a group; a mapping sets values inside it
    (`sweep={batch_sizes: [32]}` is `sweep.batch_sizes=[32]`)."""
    if isinstance(value, dict) and value:
        return [o for k, v in value.items() for o in _as_overrides(f"{key}.{k}", v)]
    return [f"{key}={_hydra_value(value)}"]


def plain_overrides(config: dict[str, Any]) -> list[str]:
    """--config's keys other than experiment and overrides, as Hydra overrides."""
    return [o for k, v in config.items() if k not in WORKFLOW_KEYS for o in _as_overrides(k, v)]


def workflow_overrides(config: dict[str, Any]) -> list[str]:
    """Every override a `snakemake --config ...` gives: its plain keys first, then
    `overrides=[...]` (which can say what plain keys cannot, e.g. `+policy.x={...}`)."""
    check_workflow_config(config)
    return plain_overrides(config) + parse_overrides(config.get("overrides"))


def parse_overrides(value: Any) -> list[str]:
    """Overrides as Snakemake's --config hands them over: a YAML list, or one string.

    `--config 'overrides=["a=[1,2]","b=3"]'` arrives as a list; the unquoted
    `--config overrides=[a=[1,2],b=3]` arrives as the string "[a=[1,2],b=3]", which is
    split on the commas that are not inside brackets or quotes.
    """
    if value is None or value == "":
        return []
    if isinstance(value, list | tuple):
        return [str(v) for v in value]
    if not isinstance(value, str):
        raise ConfigError(f"overrides: expected a list of Hydra overrides, got {value!r}")
    text = value.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    parts, depth, quote, current = [], 0, None, []
    for char in text:
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in "[{(":
            depth += 1
        elif char in "]})":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
            continue
        current.append(char)
    parts.append("".join(current).strip())
    return [p for p in parts if p]


def options(conf_dir: Path, group: str) -> list[str]:
    """The options of a config group: its yaml files' names (and the caps' variants)."""
    made = cap_variants() if group == "variant" else {}
    return sorted({p.stem for p in (Path(conf_dir) / group).glob("*.yaml")} | set(made))


def _composition_error(conf_dir: Path, exc: Exception) -> ConfigError:
    text = str(exc)
    missing = re.search(r"Could not (?:find|load) '([\w/]+)/([^/']+)'", text)
    if missing:
        group, option = missing.groups()
        allowed = ", ".join(options(conf_dir, group))
        return ConfigError(f"unknown {group} '{option}' (allowed: {allowed})")
    env = re.search(r"Environment variable '(\w+)' not found", text)
    if env:
        return ConfigError(
            f"{env.group(1)} is not set; this configuration reads it (e.g. tracking=server)"
        )
    key = re.search(r"Could not override '([^']+)'", text)
    if key and schema.declares(key.group(1)):
        return ConfigError(
            f"override of '{key.group(1)}': a setting its yaml leaves out; add it with a "
            f"leading + (+{key.group(1)}=...)"
        )
    if key and (new := schema.renamed(key.group(1))):
        return ConfigError(f"override of '{key.group(1)}': renamed {new}")
    if key:
        return ConfigError(f"override of unknown key '{key.group(1)}': no such key in the config")
    return ConfigError(text.strip().splitlines()[0])


def check_syntax(override_list: list[str]) -> None:
    """Each override parsed on its own, so that a syntax error names the override it is in
    (Hydra's own message, e.g. "no viable alternative at input '[4,8'", does not)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    parser = OverridesParser.create()
    for override in override_list:
        try:
            parser.parse_override(override)
        except HydraException as exc:
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else "a syntax error"
            raise ConfigError(
                f"override '{override}' does not parse: {reason} "
                "(an unclosed bracket or quote? lists are written [a,b])"
            ) from None


def cap_variants() -> dict[str, dict[str, Any]]:
    """A variant per instruction-set generation (core/isa.py CAPS), by its name: the PyPI
    packages on every backend, their kernels capped at it (a cap sets oneDNN's, XLA's and
    ATen's own variables: core/isa.py environment)."""
    return {
        cap.variant: {"description": f"PyPI packages, kernels capped at {cap.name}",
                      "backends": None, "isa": cap.name, "env": {}, "jit_compile": "auto",
                      "wheel": None, "build": None}
        for cap in isa.CAPS
    }


def _store_cap_variants() -> None:
    """The caps' variants, as Hydra's variant group finds a yaml of conf/variant/."""
    from hydra.core.config_store import ConfigStore

    store = ConfigStore.instance()
    for name, variant in cap_variants().items():
        store.store(group="variant", name=name, node={name: variant})


_store_cap_variants()  # before anything composes: Hydra reads its store as a search path

_KEPT_NAME = re.compile(r"\b[A-Za-z0-9]\w*?" + re.escape(policies.KEEP) + r"[A-Za-z0-9_]+\b")


def kept_policies(conf_dir: Path, texts: list[str]) -> dict[str, dict[str, Any]]:
    """The kept policies (core/policies.py KEEP) that `texts` (overrides, the experiments'
    yaml) name, each made from its policy's yaml; a name whose policy has no yaml is an error."""
    from omegaconf import OmegaConf

    found = {}
    for name in sorted({m for text in texts for m in _KEPT_NAME.findall(text)}):
        base, _ = policies.kept(name)
        path = conf_dir / "policy" / f"{base}.yaml"
        if not path.exists():
            raise ConfigError(f"policy {name}: no policy {base} (conf/policy/{base}.yaml) to keep "
                              "layers of in float32")
        facts = OmegaConf.to_container(OmegaConf.load(path))[base]
        found[name] = policies.keeping(name, facts)
    return found


def _store_kept_policies(conf_dir: Path, override_list: list[str]) -> None:
    """Those a composition asks for, as Hydra's policy group finds a yaml of conf/policy/."""
    from hydra.core.config_store import ConfigStore

    texts = [*override_list, *(p.read_text() for p in (conf_dir / "experiment").glob("*.yaml"))]
    for name, facts in kept_policies(conf_dir, texts).items():
        ConfigStore.instance().store(group="policy", name=name, node={name: facts})


def compose_config(
    conf_dir: str | Path, experiment: str | None = None, overrides: Any = None
) -> dict[str, Any]:
    """Compose conf/config.yaml with an experiment and overrides; return a checked dict."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    conf_dir = Path(conf_dir).resolve()
    override_list = parse_overrides(overrides)
    check_syntax(override_list)
    _store_kept_policies(conf_dir, override_list)
    if experiment:
        override_list.append(f"experiment={experiment}")
    try:
        with initialize_config_dir(str(conf_dir), version_base="1.3"):
            composed = compose("config", overrides=override_list)
        cfg = OmegaConf.to_container(composed, resolve=True)
    except (HydraException, OmegaConfBaseException) as exc:
        raise _composition_error(conf_dir, exc) from None
    schema.validate(cfg)
    checks.check(cfg)
    return cfg
