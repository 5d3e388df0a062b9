"""Every setting is declared once (plan/settings.py, core/contract/run.py) and every declared
setting has its default in a yaml of conf/: neither can go without the other."""

from dataclasses import MISSING, fields, is_dataclass
from pathlib import Path
from typing import Any, get_type_hints

import pytest
import yaml
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from mptbench.core.policies import Policy
from mptbench.plan import ConfigError, compose_config, options, schema
from mptbench.plan.settings import Config, PolicySettings

CONF = Path(__file__).resolve().parents[2] / "conf"
# Groups of options: each yaml is one model, dataset, ... rather than a group's defaults.
OPTION_GROUPS = ("dataset", "model", "backend", "policy", "variant")
LIST_GROUPS = ("model", "backend", "policy", "variant")


def _yaml_files(experiments: bool) -> list[tuple[Path, list[str]]]:
    """Every yaml of conf/ (the experiments' where asked), with the key path its content sits
    at (an experiment's at the top: `# @package _global_`)."""
    found = [(CONF / "config.yaml", [])]
    for group in sorted(p for p in CONF.iterdir() if p.is_dir() and p.name != "experiment"):
        found += [(path, [group.name]) for path in sorted(group.glob("*.yaml"))]
    if experiments:
        found += [(path, []) for path in sorted((CONF / "experiment").glob("*.yaml"))]
    return found


def _given(node: Any, schema_node: dict[str, Any], path: list[str], out: dict[str, str]):
    """The key paths a yaml gives (an option's name as `*`), each mapped to its declaration's
    doc, or to None where nothing declares it."""
    if not isinstance(node, dict):
        if isinstance(node, list) and "properties" in schema_node.get("items", {}):
            for item in node:
                _given(item, schema_node["items"], path, out)
        return
    for key, value in node.items():
        declared = schema_node.get("properties", {}).get(key)
        step = key
        if declared is None and _options(schema_node):
            declared, step = _options(schema_node), "*"
        where = [*path, step]
        doc = declared and ("an option's name" if step == "*" else declared.get("description"))
        out[".".join(where)] = doc or None
        if declared and ("properties" in declared or isinstance(value, list)):
            _given(value, declared, where, out)


def _options(node: dict[str, Any]) -> dict[str, Any] | None:
    """The declaration of each option of a group of options (model.*, policy.*, ...)."""
    inner = node.get("additionalProperties")
    return inner if isinstance(inner, dict) and "properties" in inner else None


def _at(path: list[str]) -> dict[str, Any]:
    node = schema.document()
    for key in path:
        node = node["properties"][key]
    return node


def given_by_yaml(experiments: bool) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for path, at in _yaml_files(experiments):
        content = yaml.safe_load(path.read_text()) or {}
        content.pop("defaults", None)  # Hydra's own: what the file builds on
        if at:
            out[".".join(at)] = _at(at)["description"]  # a group of conf/ gives its key
        _given(content, _at(at), at, out)
    return out


def declared(node: dict[str, Any] | None = None, path: tuple[str, ...] = ()) -> list[str]:
    """Every declared key path (an option's name as `*`)."""
    node = schema.document() if node is None else node
    found = []
    for key, inner in node.get("properties", {}).items():
        found.append(".".join((*path, key)))
        found += declared(inner, (*path, key))
        if _options(inner):
            found += declared(_options(inner), (*path, key, "*"))
        if "properties" in inner.get("items", {}):
            found += declared(inner["items"], (*path, key))
    return found


def test_every_key_of_every_yaml_is_declared():
    undeclared = sorted(k for k, doc in given_by_yaml(experiments=True).items() if doc is None)
    assert not undeclared, f"no declaration (plan/settings.py, core/contract/run.py): {undeclared}"


def test_every_declaration_has_a_default_in_a_yaml():
    given = given_by_yaml(experiments=False)  # an experiment overrides a default
    missing = sorted(set(declared()) - set(given))
    assert not missing, f"declared, but no yaml of conf/ (experiments aside) gives it: {missing}"


def test_every_option_of_every_group_passes_the_check(monkeypatch):
    """Each option composed: a setting every option must give is given by each."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5000")
    every = [f"{group}=[{','.join(options(CONF, group))}]" for group in LIST_GROUPS]
    runs = [every] + [
        [f"{group}={option}"]
        for group in ("dataset", "sweep", "tracking", "train", "device")
        for option in options(CONF, group)
    ]
    with initialize_config_dir(str(CONF), version_base="1.3"):
        for overrides in runs:
            cfg = OmegaConf.to_container(compose("config", overrides=overrides), resolve=True)
            schema.validate(cfg)  # the rules across fields (checks.py) are test_compose's


def _declaring_classes(cls: type, seen: set[type]) -> set[type]:
    """The dataclasses a declaration holds, at any depth (shapes of mappings too)."""
    seen.add(cls)
    hints = get_type_hints(cls)
    for f in fields(cls):
        candidates = [f.metadata.get("shape"), *_inner_types(hints[f.name])]
        for inner in candidates:
            if inner is not None and is_dataclass(inner) and inner not in seen:
                _declaring_classes(inner, seen)
    return seen


def _inner_types(hint: Any) -> list[Any]:
    found = [hint]
    for arg in getattr(hint, "__args__", ()):
        found += _inner_types(arg)
    return found


def _settings(cls: type) -> list:
    return [f for f in fields(cls) if "doc" in f.metadata]


def test_every_setting_has_a_one_line_doc():
    bad = [
        f"{cls.__name__}.{f.name}"
        for cls in _declaring_classes(Config, set())
        for f in _settings(cls)
        if not f.metadata["doc"].strip() or "\n" in f.metadata["doc"] or len(f.metadata["doc"]) > 90
    ]
    assert not bad


def _default(f) -> Any:
    if f.default_factory is not MISSING:
        return f.default_factory()
    return f.default


def test_defaults_live_in_the_yaml_and_an_option_that_leaves_a_key_out_has_none_of_it():
    """A declaration's default is only what an option of a group leaves out: nothing (None,
    empty, false); a group's settings (train, sweep, device, ...) have theirs in the yaml."""
    in_options = set()
    for group in OPTION_GROUPS:
        hint = get_type_hints(Config)[group]
        option = getattr(hint, "__args__", (hint,))[-1]
        in_options |= _declaring_classes(option, set())
    with_default = [
        (cls, f)
        for cls in _declaring_classes(Config, set())
        for f in _settings(cls)
        if _default(f) is not MISSING and not f.metadata["kinds"]
    ]
    something = [f"{cls.__name__}.{f.name}" for cls, f in with_default if _default(f)]
    assert not something, "an option that leaves a key out must have nothing there"
    outside = [f"{cls.__name__}.{f.name}" for cls, f in with_default if cls not in in_options]
    assert not outside, "a group's defaults belong in its yaml"
    assert with_default  # the groups of options have such keys (model.*.application, ...)


def test_a_policys_declarations_are_the_policys_own_fields():
    assert [f.name for f in fields(PolicySettings)] == [
        f.name for f in fields(Policy) if f.name != "name"
    ]


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("~device.cpu.calibrate.min_gain", "device.cpu.calibrate.min_gain: missing"),
        ("~sweep.fit_search", "sweep.fit_search: missing"),
        ("~train.parity_steps", "train.parity_steps: missing"),
        ("~tracking.env_if_set", "tracking.env_if_set: missing"),
    ],
)
def test_a_setting_taken_out_of_its_yaml_is_named_missing(override, message):
    """Every setting of a group is given (the workflow reads each without a default of its
    own), so taking one out is one line naming it."""
    with pytest.raises(ConfigError) as info:
        compose_config(CONF, "smoke", [override])
    assert str(info.value) == message
