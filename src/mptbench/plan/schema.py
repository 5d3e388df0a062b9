"""The configuration's JSON Schema, built from the settings' declarations (plan/settings.py's
`Config` and the run's dataclasses it holds), and the check against it: errors as one line
naming the key. Every object is closed, so a misspelt key fails before any job starts."""

from __future__ import annotations

import types
import typing
from dataclasses import MISSING, fields, is_dataclass
from functools import cache
from typing import Any

from mptbench.plan.errors import ConfigError
from mptbench.plan.settings import Config

_TYPE_WORDS = {
    "integer": "an integer",
    "number": "a number",
    "string": "a string",
    "boolean": "true or false",
    "array": "a list",
    "object": "a mapping",
}
_JSON_TYPES = {int: "integer", float: "number", str: "string", bool: "boolean"}
# The rules of a list's items, a mapping's values and its keys, under their JSON Schema names.
_NESTED = {"items": "items", "values": "additionalProperties", "keys": "propertyNames"}


# Settings renamed, each by its old last name: where the old name stood, what it is now called.
RENAMED = {
    "memory_limit_mb": {
        "train": "train.kill_above_mb (the trainer is killed past it)",
        "device": "device.<kind>.fits_search_mb (the fits search's memory)",
    },
}


def renamed(key: str) -> str | None:
    """A dotted key's new name, where the setting it names was renamed; None otherwise."""
    parts = key.split(".")
    return RENAMED.get(parts[-1], {}).get(parts[0]) if len(parts) > 1 else None


@cache
def document() -> dict[str, Any]:
    """The JSON Schema of the composed configuration."""
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **_object(Config)}


def declares(key: str) -> bool:
    """Whether a dotted key (model.seed_convnet.backends) names a setting of the schema."""
    node = document()
    for part in key.split("."):
        properties = node.get("properties", {})
        if part in properties:
            node = properties[part]
        elif isinstance(node.get("additionalProperties"), dict):
            node = node["additionalProperties"]
        else:
            return False
    return True


def _declared(cls: type, kind: str | None = None) -> list:
    """The fields of a declaring dataclass that are settings (of a device kind's block, where
    `kind` is given): those made by `setting()`."""
    return [
        f
        for f in fields(cls)
        if "doc" in f.metadata and (not f.metadata["kinds"] or kind in f.metadata["kinds"])
    ]


def _object(cls: type, kind: str | None = None) -> dict[str, Any]:
    """A closed object: every setting required but those an option may leave out."""
    hints = typing.get_type_hints(cls)
    chosen = _declared(cls, kind)
    return {
        "type": "object",
        "additionalProperties": False,
        "required": [f.name for f in chosen if _required(f)],
        "properties": {f.name: _setting(hints[f.name], f.metadata) for f in chosen},
    }


def _required(f) -> bool:
    no_default = f.default is MISSING and f.default_factory is MISSING
    return no_default or bool(f.metadata["kinds"])


def _setting(hint: Any, metadata: dict[str, Any]) -> dict[str, Any]:
    """One setting's schema: the annotation's type, with its rules and its doc."""
    # A setting for some kinds of device only is None on the others, never null in a yaml.
    nullable = not metadata["kinds"]
    schema = _type(hint, metadata["shape"], metadata["kind"], nullable)
    return {**_with_rules(schema, metadata["rules"]), "description": metadata["doc"]}


def _with_rules(schema: dict[str, Any], rules: dict[str, Any]) -> dict[str, Any]:
    """A type's schema with the declaration's rules: `allowed` and `anyOf` say the values
    outright (the type goes), `message` is `x-message`, and items, values and keys nest."""
    rules = dict(rules)
    if "allowed" in rules:
        schema = {"enum": list(rules.pop("allowed"))}
    if "anyOf" in rules:
        schema = {k: v for k, v in schema.items() if k != "type"}
    for ours, theirs in _NESTED.items():
        if ours in rules:
            inner = schema.get(theirs) if isinstance(schema.get(theirs), dict) else {}
            schema[theirs] = _with_rules(inner, rules.pop(ours))
    if "message" in rules:
        rules["x-message"] = rules.pop("message")
    return {**schema, **rules}


def _type(
    hint: Any, shape: type | None = None, kind: str | None = None, nullable: bool = True
) -> dict[str, Any]:
    """The JSON Schema of a Python annotation (null allowed where it says `| None`)."""
    options = _union(hint)
    null = type(None) in options and nullable
    options = [o for o in options if o is not type(None)]
    if shape is not None or len(options) == 1 and is_dataclass(options[0]):
        schema = _object(shape or options[0], kind)
    elif len(options) == 1 and typing.get_origin(options[0]) in (tuple, list):
        schema = {"type": "array", "items": _type(typing.get_args(options[0])[0])}
    elif len(options) == 1 and typing.get_origin(options[0]) is dict:
        values = typing.get_args(options[0])[1]
        schema = {"type": "object"}
        if values is not Any:
            schema["additionalProperties"] = _type(values)
    elif options == [Any]:
        schema = {}
    else:
        schema = {"type": [_JSON_TYPES[o] for o in options]}
    if null:
        schema["type"] = [*_types(schema), "null"]
    return _single(schema)


def _union(hint: Any) -> list[Any]:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return list(typing.get_args(hint))
    return [hint]


def _types(schema: dict[str, Any]) -> list[str]:
    found = schema.get("type", [])
    return [found] if isinstance(found, str) else list(found)


def _single(schema: dict[str, Any]) -> dict[str, Any]:
    """`type: [integer]` written as `type: integer`."""
    if isinstance(schema.get("type"), list) and len(schema["type"]) == 1:
        schema["type"] = schema["type"][0]
    return schema


def top_level_keys() -> list[str]:
    return list(document()["properties"])


@cache
def _validator():
    import jsonschema

    return jsonschema.Draft202012Validator(document())


def key_path(parts) -> str:
    """["sweep", "batch_sizes", 0] -> "sweep.batch_sizes[0]"."""
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _expected(schema: dict[str, Any]) -> str:
    """What a value must be, in words, from the schema it broke."""
    types = schema.get("type", [])
    types = [types] if isinstance(types, str) else list(types)
    main = next((t for t in types if t != "null"), "number")
    if "minimum" in schema:
        words = f"{_TYPE_WORDS[main]} >= {schema['minimum']}"
    elif schema.get("exclusiveMinimum") == 0:
        words = "a positive number"
    else:
        words = _TYPE_WORDS.get(main, main)
    return words + (" (or null)" if "null" in types else "")


def _custom(schema: dict[str, Any], validator: str) -> str | None:
    """The schema's own wording: `x-message`, one text or one per validator."""
    custom = schema.get("x-message")
    return custom.get(validator) if isinstance(custom, dict) else custom


def _message(error) -> str:
    schema, value, validator = error.schema, error.instance, error.validator
    where = key_path(error.absolute_path)
    prefix = f"{where}: " if where else ""
    if validator == "additionalProperties":
        known = list(schema.get("properties", {}))
        extra = sorted(set(value) - set(known))
        new = renamed(key_path([*error.absolute_path, extra[0]]))
        if new:
            return f"{prefix}'{extra[0]}' is renamed: {new}"
        allowed = f" (allowed: {', '.join(known)})" if known else ""
        return f"{prefix}unknown key '{extra[0]}'{allowed}"
    if validator == "required":
        missing = next(k for k in schema["required"] if k not in value)
        text = _custom(schema.get("properties", {}).get(missing, {}), "required")
        return f"{key_path([*error.absolute_path, missing])}: {text or 'missing'}"
    custom = _custom(schema, validator)
    if custom:
        if validator in ("minItems", "minProperties", "uniqueItems") or value in ("", None):
            return f"{prefix}{custom}"
        return f"{prefix}{value!r} {custom}"
    if validator == "enum":
        words = [str(v).lower() if isinstance(v, bool) else str(v) for v in schema["enum"]]
        return f"{prefix}{value!r} (allowed: {', '.join(words)})"
    if validator in ("type", "minimum", "exclusiveMinimum"):
        return f"{prefix}{value!r} is not {_expected(schema)}"
    return f"{prefix}{error.message}"


def validate(cfg: dict[str, Any]) -> None:
    """Raise ConfigError for the most relevant schema violation, if any."""
    import jsonschema

    error = jsonschema.exceptions.best_match(_validator().iter_errors(cfg))
    if error is not None:
        raise ConfigError(_message(error))
