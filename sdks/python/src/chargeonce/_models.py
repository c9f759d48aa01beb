"""The API's resources as typed, immutable values. Pure: no I/O.

Money is a decimal string (``"15.00"``), never a float. Every model keeps the
JSON it was read from in ``raw``. Fields whose metadata says ``wire=False`` are
not members of the wire schema (the contract test skips them).
"""
from __future__ import annotations

import decimal
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Dict, Generic, List, Mapping, Optional, Type, TypeVar, Union, cast

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
    #: Canceled while pending (``POST /v1/payments/{id}/cancel``, or the service
    #: gave up on it): nothing was taken, and its order may be paid again.
    CANCELED = "canceled"


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
    ORDER_ALREADY_PAID = "order_already_paid"
    PAYMENT_CANCELED = "payment_canceled"
    PAYMENT_NOT_CANCELABLE = "payment_not_cancelable"
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


class HistoryAcquirerCall(str, Enum):
    """Which acquirer call a history entry is about (an unknown one stays a plain ``str``)."""

    CHARGE = "charge"
    LOOKUP = "lookup"
    REFUND = "refund"


class HistoryCallOutcome(str, Enum):
    """How an acquirer call ended."""

    SUCCEEDED = "succeeded"
    DECLINED = "declined"
    REFUSED = "refused"
    NOT_FOUND = "not_found"
    UNKNOWN = "unknown"
    NOT_SENT = "not_sent"


class HistorySettledBy(str, Enum):
    """Who settled a payment."""

    REQUEST = "request"
    WEBHOOK = "webhook"
    RECONCILER = "reconciler"


def _opt_int(data: Mapping[str, Any], name: str) -> Optional[int]:
    value = data.get(name)
    return None if value is None else int(value)


@dataclass(frozen=True)
class HistoryTally:
    """How often one kind of repeat of a key reached the service, and when last."""

    count: int
    last_at: Optional[str]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "HistoryTally":
        return cls(count=int(data["count"]), last_at=_opt(data, "last_at"))


@dataclass(frozen=True)
class HistoryKey:
    """A key of the payment that still exists, and its repeats by answer:
    ``replays`` (its stored answer replayed), ``conflicts`` (409s: its first
    request was still running), ``mismatches`` (422s: reused for another request)."""

    key: str
    replays: HistoryTally
    conflicts: HistoryTally
    mismatches: HistoryTally
    raw: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False, metadata=_LOCAL)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "HistoryKey":
        return cls(
            key=str(data["key"]),
            replays=HistoryTally.from_json(data["replays"]),
            conflicts=HistoryTally.from_json(data["conflicts"]),
            mismatches=HistoryTally.from_json(data["mismatches"]),
            raw=dict(data),
        )


@dataclass(frozen=True)
class HistoryEntryBase:
    """The members every history entry has; ``type`` says which entry it is
    (one of the ``*Entry`` classes, or :class:`UnknownHistoryEntry`)."""

    type: str
    #: Its position: increasing, not dense.
    seq: int
    #: When it was written (RFC 3339, the store's clock).
    at: str
    #: The refund it is about, when it is about one of the payment's refunds.
    refund_id: Optional[str]
    raw: Dict[str, Any] = field(compare=False, repr=False, metadata=_LOCAL)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "HistoryEntryBase":
        return cls(**cls._base(data))

    @staticmethod
    def _base(data: Mapping[str, Any]) -> Dict[str, Any]:
        return {
            "type": str(data.get("type", "")),
            "seq": int(data["seq"]),
            "at": str(data["at"]),
            "refund_id": _opt(data, "refund_id"),
            "raw": dict(data),
        }


@dataclass(frozen=True)
class ClaimedEntry(HistoryEntryBase):
    """The first request with ``key`` claimed it and created the payment."""

    key: str
    instance: str

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "ClaimedEntry":
        return cls(**cls._base(data), key=str(data["key"]), instance=str(data["instance"]))


@dataclass(frozen=True)
class LinkedEntry(HistoryEntryBase):
    """A request with ``key`` found the order already paid (or being paid) by
    this payment and was linked to it: nothing was charged."""

    key: str
    instance: str

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "LinkedEntry":
        return cls(**cls._base(data), key=str(data["key"]), instance=str(data["instance"]))


@dataclass(frozen=True)
class TakenOverEntry(HistoryEntryBase):
    """An unfinished key's expired lease was taken over (by a retry or the
    completer), to resume from ``recovery_point``."""

    key: str
    instance: str
    recovery_point: str

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "TakenOverEntry":
        return cls(
            **cls._base(data),
            key=str(data["key"]),
            instance=str(data["instance"]),
            recovery_point=str(data["recovery_point"]),
        )


@dataclass(frozen=True)
class AcquirerCallEntry(HistoryEntryBase):
    """One acquirer call ended: ``call`` (a :class:`HistoryAcquirerCall`) and
    ``outcome`` (a :class:`HistoryCallOutcome`), both kept as received."""

    call: str
    outcome: str
    latency_ms: int
    #: The key the acquirer saw (the same on every attempt).
    acquirer_key: str
    instance: str
    reason: Optional[str]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "AcquirerCallEntry":
        return cls(
            **cls._base(data),
            call=str(data["call"]),
            outcome=str(data["outcome"]),
            latency_ms=int(data["latency_ms"]),
            acquirer_key=str(data["acquirer_key"]),
            instance=str(data["instance"]),
            reason=_opt(data, "reason"),
        )


@dataclass(frozen=True)
class AnsweredEntry(HistoryEntryBase):
    """The key's final answer (HTTP ``status``) was stored; replayed from now on."""

    key: str
    status: int

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "AnsweredEntry":
        return cls(**cls._base(data), key=str(data["key"]), status=int(data["status"]))


@dataclass(frozen=True)
class CancelRequestedEntry(HistoryEntryBase):
    """The payment is to be canceled: its charge is only looked up from now
    on (after the settle window), never sent again. ``key`` is the cancel's
    idempotency key; ``None`` when the service gave up on a payment pending
    too long."""

    key: Optional[str]
    instance: str

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "CancelRequestedEntry":
        return cls(**cls._base(data), key=_opt(data, "key"), instance=str(data["instance"]))


@dataclass(frozen=True)
class SettledEntry(HistoryEntryBase):
    """The payment left ``pending`` for its final ``status``; ``by`` (a
    :class:`HistorySettledBy`) says who: a request (``key``), an acquirer
    webhook (``event_id``) or the reconciler."""

    status: str
    by: str
    key: Optional[str]
    event_id: Optional[str]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "SettledEntry":
        return cls(
            **cls._base(data),
            status=str(data["status"]),
            by=str(data["by"]),
            key=_opt(data, "key"),
            event_id=_opt(data, "event_id"),
        )


@dataclass(frozen=True)
class WebhookReceivedEntry(HistoryEntryBase):
    """An authentic acquirer webhook about the payment that changed nothing."""

    event_id: str
    kind: str

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "WebhookReceivedEntry":
        return cls(**cls._base(data), event_id=str(data["event_id"]), kind=str(data["kind"]))


@dataclass(frozen=True)
class RefundReservedEntry(HistoryEntryBase):
    """A refund's ``amount`` was reserved on the payment (``refund_id`` names the refund)."""

    key: str
    amount: Amount
    instance: str

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "RefundReservedEntry":
        return cls(
            **cls._base(data),
            key=str(data["key"]),
            amount=Amount.from_json(data["amount"]),
            instance=str(data["instance"]),
        )


@dataclass(frozen=True)
class RefundEndedEntry(HistoryEntryBase):
    """A refund reached its final ``status``."""

    status: str

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "RefundEndedEntry":
        return cls(**cls._base(data), status=str(data["status"]))


@dataclass(frozen=True)
class EventAttemptEntry(HistoryEntryBase):
    """One delivery attempt of a merchant event about the payment: ``result`` is
    ``delivered``, ``failed`` (due again later) or ``given_up``; ``status`` the
    shop's HTTP status, when it answered."""

    event_id: str
    event_type: str
    attempt: int
    result: str
    status: Optional[int]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "EventAttemptEntry":
        return cls(
            **cls._base(data),
            event_id=str(data["event_id"]),
            event_type=str(data["event_type"]),
            attempt=int(data["attempt"]),
            result=str(data["result"]),
            status=_opt_int(data, "status"),
        )


@dataclass(frozen=True)
class EventResentEntry(HistoryEntryBase):
    """An operator made a merchant event due again."""

    event_id: str

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "EventResentEntry":
        return cls(**cls._base(data), event_id=str(data["event_id"]))


@dataclass(frozen=True)
class KeyExpiredEntry(HistoryEntryBase):
    """A key of the payment expired and was swept: how often it had been repeated."""

    key: str
    replays: HistoryTally
    conflicts: HistoryTally
    mismatches: HistoryTally

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "KeyExpiredEntry":
        return cls(
            **cls._base(data),
            key=str(data["key"]),
            replays=HistoryTally.from_json(data["replays"]),
            conflicts=HistoryTally.from_json(data["conflicts"]),
            mismatches=HistoryTally.from_json(data["mismatches"]),
        )


@dataclass(frozen=True)
class FindingEntry(HistoryEntryBase):
    """The reconciler found a disagreement about the payment (``kind``:
    ``duplicate_charge``, ``orphan_charge``, ``missing_charge``, ``mismatch``)."""

    finding_id: int
    kind: str

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "FindingEntry":
        return cls(**cls._base(data), finding_id=int(data["finding_id"]), kind=str(data["kind"]))


@dataclass(frozen=True)
class FindingResolvedEntry(HistoryEntryBase):
    """A finding about the payment was resolved (``how``: ``refunded`` or ``manual``)."""

    finding_id: int
    how: str

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "FindingResolvedEntry":
        return cls(**cls._base(data), finding_id=int(data["finding_id"]), how=str(data["how"]))


@dataclass(frozen=True)
class UnknownHistoryEntry(HistoryEntryBase):
    """An entry of a ``type`` this SDK does not know (a newer server's): its
    common members, and every member as received in ``raw``."""

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "UnknownHistoryEntry":
        return cls(**cls._base(data))


HistoryEntry = Union[
    ClaimedEntry,
    LinkedEntry,
    TakenOverEntry,
    AcquirerCallEntry,
    AnsweredEntry,
    CancelRequestedEntry,
    SettledEntry,
    WebhookReceivedEntry,
    RefundReservedEntry,
    RefundEndedEntry,
    EventAttemptEntry,
    EventResentEntry,
    KeyExpiredEntry,
    FindingEntry,
    FindingResolvedEntry,
    UnknownHistoryEntry,
]

#: The entry classes by the ``type`` they stand for.
HISTORY_ENTRY_TYPES: Mapping[str, Type[HistoryEntryBase]] = {
    "claimed": ClaimedEntry,
    "linked": LinkedEntry,
    "taken_over": TakenOverEntry,
    "acquirer_call": AcquirerCallEntry,
    "answered": AnsweredEntry,
    "cancel_requested": CancelRequestedEntry,
    "settled": SettledEntry,
    "webhook_received": WebhookReceivedEntry,
    "refund_reserved": RefundReservedEntry,
    "refund_ended": RefundEndedEntry,
    "event_attempt": EventAttemptEntry,
    "event_resent": EventResentEntry,
    "key_expired": KeyExpiredEntry,
    "finding": FindingEntry,
    "finding_resolved": FindingResolvedEntry,
}


def history_entry(data: Mapping[str, Any]) -> HistoryEntry:
    """One history entry, by its ``type``; a type this SDK does not know is an
    :class:`UnknownHistoryEntry` (readable, never an error)."""
    if not isinstance(data, Mapping):
        raise TypeError(f"a history entry is an object, not {type(data).__name__}")
    kind = data.get("type")
    known = HISTORY_ENTRY_TYPES.get(kind) if isinstance(kind, str) else None
    entry = (known or UnknownHistoryEntry).from_json(data)
    return cast(HistoryEntry, entry)


@dataclass(frozen=True)
class PaymentHistory:
    """``GET /v1/payments/{id}/history``: every entry of a payment's history
    (and its refunds'), oldest first, and the repeat counts of its keys that
    still exist (a swept key's counts are in its ``key_expired`` entry)."""

    object: str
    payment_id: str
    entries: List[HistoryEntry]
    keys: List[HistoryKey]
    raw: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False, metadata=_LOCAL)

    def key_repeats(self, key: str) -> Optional[HistoryKey]:
        """The repeat counts of one of the payment's keys that still exists, or ``None``."""
        return next((k for k in self.keys if k.key == key), None)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "PaymentHistory":
        return cls(
            object=str(data.get("object", "payment_history")),
            payment_id=str(data["payment_id"]),
            entries=[history_entry(entry) for entry in data["entries"]],
            keys=[HistoryKey.from_json(key) for key in data["keys"]],
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
