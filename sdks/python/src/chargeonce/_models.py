"""The API's resources as typed, immutable values. Pure: no I/O.

Money is a decimal string (``"15.00"``), never a float. Every model keeps the
JSON it was read from in ``raw``. Fields whose metadata says ``wire=False`` are
not members of the wire schema (the contract test skips them).
"""
from __future__ import annotations

import decimal
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Dict, Generic, List, Mapping, Optional, TypeVar, Union

_LOCAL = {"wire": False}


@dataclass(frozen=True)
class Amount:
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

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Amount":
        return cls(str(data["value"]), str(data["currency"]))


class PaymentStatus(str, Enum):
    PENDING = "pending"
    SUCCEEDED = "succeeded"
    DECLINED = "declined"


class ProblemCode(str, Enum):
    """The problem codes this SDK knows; an unknown code stays a plain ``str``."""

    MISSING_IDEMPOTENCY_KEY = "missing_idempotency_key"
    INVALID_IDEMPOTENCY_KEY = "invalid_idempotency_key"
    DUPLICATE_IDEMPOTENCY_KEY = "duplicate_idempotency_key"
    MALFORMED_JSON = "malformed_json"
    MISSING_PARAMETER = "missing_parameter"
    INVALID_PARAMETER = "invalid_parameter"
    INVALID_CURSOR = "invalid_cursor"
    UNAUTHORIZED = "unauthorized"
    PAYMENT_DECLINED = "payment_declined"
    NOT_FOUND = "not_found"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    REQUEST_IN_PROGRESS = "request_in_progress"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
    IDEMPOTENCY_KEY_REUSED = "idempotency_key_reused"
    INVALID_REQUEST = "invalid_request"
    INVALID_AMOUNT = "invalid_amount"
    UNSUPPORTED_CURRENCY = "unsupported_currency"
    STORE_UNAVAILABLE = "store_unavailable"
    STORE_OVERLOADED = "store_overloaded"
    ACQUIRER_UNAVAILABLE = "acquirer_unavailable"
    RATE_LIMITED = "rate_limited"
    REQUEST_TIMEOUT = "request_timeout"
    BODY_TIMEOUT = "body_timeout"
    INTERNAL_ERROR = "internal_error"
    REFUND_FAILED = "refund_failed"
    REFUND_EXCEEDS_AMOUNT = "refund_exceeds_amount"
    PAYMENT_NOT_REFUNDABLE = "payment_not_refundable"
    CURRENCY_MISMATCH = "currency_mismatch"
    INVALID_SIGNATURE = "invalid_signature"
    MISSING_SIGNATURE = "missing_signature"
    STALE_SIGNATURE = "stale_signature"
    WEBHOOKS_DISABLED = "webhooks_disabled"
    BAD_REQUEST = "bad_request"
    HTTP_ERROR = "http_error"
    TOO_MANY_REQUESTS = "too_many_requests"


Code = Union[ProblemCode, str]


def parse_code(code: str) -> Code:
    try:
        return ProblemCode(code)
    except ValueError:
        return code


def _opt(data: Mapping[str, Any], name: str) -> Optional[str]:
    value = data.get(name)
    return None if value is None else str(value)


@dataclass(frozen=True)
class Payment:
    id: str
    object: str
    shop_id: str
    status: str
    amount: Amount
    reference: str
    provider_payment_id: Optional[str]
    decline_code: Optional[str]
    created_at: str
    amount_refunded: Amount
    refund_status: str
    raw: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False, metadata=_LOCAL)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Payment":
        refunded = data.get("amount_refunded")
        amount = Amount.from_json(data["amount"])
        return cls(
            id=str(data["id"]),
            object=str(data.get("object", "payment")),
            shop_id=str(data["shop_id"]),
            status=str(data["status"]),
            amount=amount,
            reference=str(data["reference"]),
            provider_payment_id=_opt(data, "provider_payment_id"),
            decline_code=_opt(data, "decline_code"),
            created_at=str(data["created_at"]),
            # Both are absent only from a server from before refunds: nothing refunded.
            amount_refunded=Amount.from_json(refunded) if refunded else Amount("0", amount.currency),
            refund_status=str(data.get("refund_status") or "none"),
            raw=dict(data),
        )


@dataclass(frozen=True)
class Refund:
    id: str
    object: str
    payment_id: str
    shop_id: str
    status: str
    amount: Amount
    provider_refund_id: Optional[str]
    failure_code: Optional[str]
    created_at: str
    raw: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False, metadata=_LOCAL)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Refund":
        return cls(
            id=str(data["id"]),
            object=str(data.get("object", "refund")),
            payment_id=str(data["payment_id"]),
            shop_id=str(data["shop_id"]),
            status=str(data["status"]),
            amount=Amount.from_json(data["amount"]),
            provider_refund_id=_opt(data, "provider_refund_id"),
            failure_code=_opt(data, "failure_code"),
            created_at=str(data["created_at"]),
            raw=dict(data),
        )


@dataclass(frozen=True)
class Problem:
    """An RFC 9457 problem document. ``code`` is a :class:`ProblemCode` when known,
    else the string as received."""

    type: str
    title: str
    status: int
    detail: str
    code: Code
    request_id: Optional[str]
    raw: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False, metadata=_LOCAL)

    @property
    def payment(self) -> Optional[Payment]:
        """The payment a problem names (``payment_declined`` carries it)."""
        data = self.raw.get("payment")
        try:
            return Payment.from_json(data) if isinstance(data, dict) else None
        except (KeyError, TypeError, ValueError):
            return None

    @property
    def refund(self) -> Optional[Refund]:
        data = self.raw.get("refund")
        try:
            return Refund.from_json(data) if isinstance(data, dict) else None
        except (KeyError, TypeError, ValueError):
            return None

    @classmethod
    def from_json(cls, data: Mapping[str, Any], status: int) -> Optional["Problem"]:
        code = data.get("code")
        if not isinstance(code, str):
            return None
        raw_status = data.get("status")
        return cls(
            type=str(data.get("type", "about:blank")),
            title=str(data.get("title", "")),
            status=raw_status if isinstance(raw_status, int) else status,
            detail=str(data.get("detail", "")),
            code=parse_code(code),
            request_id=_opt(data, "request_id"),
            raw=dict(data),
        )


@dataclass(frozen=True)
class IdempotencyKeyInfo:
    """``GET /v1/idempotency-keys/{key}``: what the service knows of one key."""

    object: str
    key: str
    state: str
    recovery_point: str
    request: Dict[str, Any]
    created_at: str
    repeats: int
    last_repeat_at: Optional[str]
    expires_at: str
    lease: Optional[Dict[str, Any]]
    parked_until: Optional[str]
    response_status: Optional[int]
    payment_id: Optional[str]
    refund_id: Optional[str]
    raw: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False, metadata=_LOCAL)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "IdempotencyKeyInfo":
        return cls(
            object=str(data.get("object", "idempotency_key")),
            key=str(data["key"]),
            state=str(data["state"]),
            recovery_point=str(data["recovery_point"]),
            request=dict(data["request"]),
            created_at=str(data["created_at"]),
            repeats=int(data.get("repeats") or 0),
            last_repeat_at=_opt(data, "last_repeat_at"),
            expires_at=str(data["expires_at"]),
            lease=data.get("lease"),
            parked_until=_opt(data, "parked_until"),
            response_status=data.get("response_status"),
            payment_id=_opt(data, "payment_id"),
            refund_id=_opt(data, "refund_id"),
            raw=dict(data),
        )


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
