"""One decoder of wire JSON into the models' dataclasses. Pure: no I/O.

A model declares its members once, as dataclass fields with type hints (the
contract test holds them to ``docs/openapi.json``); :func:`decode` reads each
member by its hint: ``str``, ``int``, ``bool``, ``Optional[...]`` (absent or
null is ``None``), ``List[...]``, a nested model (its own ``from_json``),
and ``Dict``/``Any`` as sent. A member that is absent takes the field's
default when it has one (``livemode: bool = True``: answers stored before
the member existed). A field whose metadata says ``wire=False`` is not a
member; one named ``raw`` keeps the JSON the model was read from. A
required member that is absent or null is a ``KeyError``.
"""
from __future__ import annotations

import dataclasses
import typing
from typing import Any, Dict, List, Mapping, Type, TypeVar, Union

M = TypeVar("M")


_HINTS: Dict[type, Dict[str, Any]] = {}


def _hints(cls: type) -> Dict[str, Any]:
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls)
    return hints


def decode(cls: Type[M], data: Mapping[str, Any]) -> M:
    """An instance of the dataclass ``cls`` from its wire JSON object."""
    if not isinstance(data, Mapping):
        raise TypeError(f"a {cls.__name__} is a JSON object, not {type(data).__name__}")
    hints = _hints(cls)
    values: Dict[str, Any] = {}
    for member in dataclasses.fields(cls):  # type: ignore[arg-type]
        if not member.metadata.get("wire", True):
            if member.name == "raw":
                values["raw"] = dict(data)
            continue
        if member.name not in data and member.default is not dataclasses.MISSING:
            values[member.name] = member.default
            continue
        values[member.name] = _value(hints[member.name], data.get(member.name), member.name)
    return cls(**values)


def _value(hint: Any, value: Any, name: str) -> Any:
    origin = typing.get_origin(hint)
    if origin is Union:
        present = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        if value is None:
            if len(present) < len(typing.get_args(hint)):
                return None
            raise KeyError(name)
        return _value(present[0], value, name)
    if value is None:
        raise KeyError(name)
    if origin in (list, List):
        (item,) = typing.get_args(hint)
        return [_value(item, element, name) for element in value]
    if dataclasses.is_dataclass(hint):
        return hint.from_json(value)  # type: ignore[union-attr]
    if hint is bool:
        return bool(value)
    if hint is int:
        return int(value)
    if hint is str:
        return str(value)
    return value


class Wire:
    """A model read from wire JSON by :func:`decode`."""

    @classmethod
    def from_json(cls: Type[M], data: Mapping[str, Any]) -> M:
        return decode(cls, data)
