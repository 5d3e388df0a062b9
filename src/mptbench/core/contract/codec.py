"""The contract's one JSON codec: `encode` a run, an engine job or a result as JSON-ready data,
`decode` it back typed, `decode_job` by its kind; a file another version wrote that does not
fit is a ContractError naming what does not."""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import fields, is_dataclass
from typing import Any

from mptbench.core.contract.kinds import JOB_KINDS, EngineJob


class ContractError(ValueError):
    """A job or result file that does not fit the contract (another version wrote it)."""


def encode(value: Any) -> Any:
    """A dataclass (nested ones, lists and dicts of them) as JSON-ready data; an engine job
    with its `kind`."""
    if is_dataclass(value) and not isinstance(value, type):
        data = {f.name: encode(getattr(value, f.name)) for f in fields(value)}
        kind = getattr(type(value), "KIND", None)
        return {"kind": kind, **data} if kind else data
    if isinstance(value, list | tuple):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        return {str(k): encode(v) for k, v in value.items()}
    return value


def decode(cls: type, data: Any) -> Any:
    """`cls` from what `encode` made of one; a field it does not know, or a required one it
    lacks, is a ContractError naming it."""
    if not isinstance(data, dict):
        raise ContractError(f"{cls.__name__}: expected a mapping, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    known = {f.name: f for f in fields(cls) if f.init}
    unknown = sorted(set(data) - set(known) - {"kind"})
    if unknown:
        raise ContractError(f"{cls.__name__}: unknown field(s) {', '.join(unknown)}")
    missing = [
        name
        for name, f in known.items()
        if name not in data
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        raise ContractError(f"{cls.__name__}: missing field(s) {', '.join(missing)}")
    return cls(**{name: _value(hints[name], data[name]) for name in known if name in data})


def _value(hint: Any, value: Any) -> Any:
    if value is None or hint is Any:
        return value
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        return _value(options[0], value) if len(options) == 1 else value
    if is_dataclass(hint):
        return decode(hint, value)
    if origin in (list, tuple) and args:
        items = [_value(args[0], v) for v in value]
        return tuple(items) if origin is tuple else items
    if origin is dict and args:
        return {k: _value(args[1], v) for k, v in value.items()}
    return value


def decode_job(data: Any) -> EngineJob:
    """The engine job a job file holds, by its `kind`."""
    kind = data.get("kind") if isinstance(data, dict) else None
    if kind not in JOB_KINDS:
        raise ContractError(f"unknown engine job kind {kind!r} (known: {', '.join(JOB_KINDS)})")
    return decode(JOB_KINDS[kind], data)
