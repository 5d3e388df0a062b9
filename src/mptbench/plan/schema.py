"""Check a composed configuration against schema.yaml; errors as one line naming the key."""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

from mptbench.plan.errors import ConfigError

_TYPE_WORDS = {
    "integer": "an integer",
    "number": "a number",
    "string": "a string",
    "boolean": "true or false",
    "array": "a list",
    "object": "a mapping",
}


@cache
def document() -> dict[str, Any]:
    """schema.yaml, parsed."""
    import yaml

    return yaml.safe_load(resources.files("mptbench.plan").joinpath("schema.yaml").read_text())


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
