"""What every resource shares: amounts, lists, optional members. Pure: no I/O."""
from __future__ import annotations

import decimal
from dataclasses import dataclass
from typing import Any, Dict, Generic, List, Mapping, Optional, TypeVar, Union

from .._decode import Wire

#: Field metadata of a member that is not the wire schema's (``raw``).
_LOCAL = {"wire": False}


@dataclass(frozen=True)
class Amount(Wire):
    """An amount: a decimal string in the currency's major units and an ISO 4217 code."""

    value: str
    currency: str

    def __post_init__(self) -> None:
        if isinstance(self.value, float) or not isinstance(self.value, str):  # pragma: no cover
            raise TypeError("amounts are decimal strings, never floats")
        try:
            decimal.Decimal(self.value)
        except decimal.InvalidOperation:
            raise ValueError(f"not a decimal amount: {self.value!r}") from None

    @classmethod
    def of(cls, value: Union[str, decimal.Decimal, int], currency: str) -> "Amount":
        if isinstance(value, float):
            raise TypeError("amounts are decimal strings or Decimal, never floats")
        if isinstance(value, decimal.Decimal):
            value = format(value, "f")
        return cls(str(value), currency)

    @property
    def decimal(self) -> decimal.Decimal:
        return decimal.Decimal(self.value)

    def to_json(self) -> Dict[str, str]:
        return {"value": self.value, "currency": self.currency}


def _opt(data: Mapping[str, Any], name: str) -> Optional[str]:
    value = data.get(name)
    return None if value is None else str(value)


def _livemode(data: Mapping[str, Any]) -> bool:
    """An object's ``livemode``: ``True`` when absent (an answer stored before
    test mode existed was live)."""
    value = data.get("livemode")
    return True if value is None else bool(value)


T = TypeVar("T")


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a list: newest first; ``has_more`` says whether older ones exist."""

    object: str
    data: List[T]
    has_more: bool

    @property
    def last_id(self) -> Optional[str]:
        return getattr(self.data[-1], "id", None) if self.data else None

    @property
    def first_id(self) -> Optional[str]:
        return getattr(self.data[0], "id", None) if self.data else None

    def next_params(self, params: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        """The query of the next page in the direction ``params`` walk, or
        ``None`` at the end: older after ``starting_after`` (or no cursor),
        newer before ``ending_before`` (each page is still newest first, so
        the next newer page ends before this one's first object)."""
        if not self.has_more:
            return None
        if params.get("ending_before") is not None:
            first = self.first_id
            return None if first is None else {**params, "ending_before": first, "starting_after": None}
        last = self.last_id
        return None if last is None else {**params, "starting_after": last, "ending_before": None}
