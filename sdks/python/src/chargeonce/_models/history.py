"""A payment's history: its entries, one dataclass per ``type``, and its keys' repeats. Pure: no I/O."""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable, Dict, List, Mapping, Optional, Type, TypeVar, Union, cast

from .._decode import Wire
from .common import _LOCAL, Amount


class HistoryAcquirerCall(str, Enum):
    """Which acquirer call a history entry is about (an unknown one stays a plain ``str``)."""

    CHARGE = "charge"
    LOOKUP = "lookup"
    REFUND = "refund"
    CAPTURE = "capture"
    VOID = "void"


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


@dataclass(frozen=True)
class HistoryTally(Wire):
    """How often one kind of repeat of a key reached the service, and when last."""

    count: int
    last_at: Optional[str]


@dataclass(frozen=True)
class HistoryKey(Wire):
    """A key of the payment that still exists, and its repeats by answer:
    ``replays`` (its stored answer replayed), ``conflicts`` (409s: its first
    request was still running), ``mismatches`` (422s: reused for another request)."""

    key: str
    replays: HistoryTally
    conflicts: HistoryTally
    mismatches: HistoryTally
    raw: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False, metadata=_LOCAL)


#: The entry classes by the ``type`` they stand for (each registers itself
#: with ``@_entry``: a new entry type is a dataclass of its members, nothing more).
HISTORY_ENTRY_TYPES: Dict[str, Type["HistoryEntryBase"]] = {}

E = TypeVar("E", bound="HistoryEntryBase")


def _entry(kind: str) -> Callable[[Type[E]], Type[E]]:
    def register(cls: Type[E]) -> Type[E]:
        HISTORY_ENTRY_TYPES[kind] = cls
        return cls

    return register


@dataclass(frozen=True)
class HistoryEntryBase(Wire):
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


@_entry("claimed")
@dataclass(frozen=True)
class ClaimedEntry(HistoryEntryBase):
    """The first request with ``key`` claimed it and created the payment."""

    key: str
    instance: str


@_entry("linked")
@dataclass(frozen=True)
class LinkedEntry(HistoryEntryBase):
    """A request with ``key`` found the order already paid (or being paid) by
    this payment and was linked to it: nothing was charged."""

    key: str
    instance: str


@_entry("taken_over")
@dataclass(frozen=True)
class TakenOverEntry(HistoryEntryBase):
    """An unfinished key's expired lease was taken over (by a retry or the
    completer), to resume from ``recovery_point``."""

    key: str
    instance: str
    recovery_point: str


@_entry("acquirer_call")
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


@_entry("answered")
@dataclass(frozen=True)
class AnsweredEntry(HistoryEntryBase):
    """The key's final answer (HTTP ``status``) was stored; replayed from now on."""

    key: str
    status: int


@_entry("cancel_requested")
@dataclass(frozen=True)
class CancelRequestedEntry(HistoryEntryBase):
    """The payment is to be canceled: its charge is only looked up from now
    on (after the settle window), never sent again. ``key`` is the cancel's
    idempotency key; ``None`` when the service gave up on a payment pending
    too long."""

    key: Optional[str]
    instance: str


@_entry("settled")
@dataclass(frozen=True)
class SettledEntry(HistoryEntryBase):
    """The payment left ``pending`` for its final ``status``; ``by`` (a
    :class:`HistorySettledBy`) says who: a request (``key``), an acquirer
    webhook (``event_id``) or the reconciler."""

    status: str
    by: str
    key: Optional[str]
    event_id: Optional[str]


@_entry("webhook_received")
@dataclass(frozen=True)
class WebhookReceivedEntry(HistoryEntryBase):
    """An authentic acquirer webhook about the payment that changed nothing."""

    event_id: str
    kind: str


@_entry("refund_reserved")
@dataclass(frozen=True)
class RefundReservedEntry(HistoryEntryBase):
    """A refund's ``amount`` was reserved on the payment (``refund_id`` names the refund)."""

    key: str
    amount: Amount
    instance: str


@_entry("refund_ended")
@dataclass(frozen=True)
class RefundEndedEntry(HistoryEntryBase):
    """A refund reached its final ``status``."""

    status: str


@_entry("capture_reserved")
@dataclass(frozen=True)
class CaptureReservedEntry(HistoryEntryBase):
    """A capture's ``amount`` was reserved on the payment's authorization
    (``final``: the last capture)."""

    capture_id: str
    key: str
    amount: Amount
    final: bool
    instance: str


@_entry("capture_ended")
@dataclass(frozen=True)
class CaptureEndedEntry(HistoryEntryBase):
    """A capture reached its final ``status`` (``succeeded`` or ``failed``)."""

    capture_id: str
    status: str


@_entry("release_requested")
@dataclass(frozen=True)
class ReleaseRequestedEntry(HistoryEntryBase):
    """The release of what is left of the authorization was asked: ``reason``
    ``void`` (with the void's ``key``) or ``expiry``."""

    reason: str
    instance: str
    key: Optional[str] = None


@_entry("release_ended")
@dataclass(frozen=True)
class ReleaseEndedEntry(HistoryEntryBase):
    """The release ended: ``released``, or the authorization open again."""

    reason: str
    released: bool


@_entry("event_attempt")
@dataclass(frozen=True)
class EventAttemptEntry(HistoryEntryBase):
    """One delivery attempt of a merchant event about the payment: ``result`` is
    ``delivered``, ``failed`` (due again later) or ``given_up``; ``status`` the
    shop's HTTP status, when it answered; ``endpoint_id`` the webhook endpoint
    it went to (absent in entries from before shops had several)."""

    event_id: str
    event_type: str
    attempt: int
    result: str
    status: Optional[int]
    endpoint_id: Optional[str]


@_entry("event_resent")
@dataclass(frozen=True)
class EventResentEntry(HistoryEntryBase):
    """A merchant event was made due again (by the shop or an operator)."""

    event_id: str


@_entry("key_expired")
@dataclass(frozen=True)
class KeyExpiredEntry(HistoryEntryBase):
    """A key of the payment expired and was swept: how often it had been repeated."""

    key: str
    replays: HistoryTally
    conflicts: HistoryTally
    mismatches: HistoryTally


@_entry("finding")
@dataclass(frozen=True)
class FindingEntry(HistoryEntryBase):
    """The reconciler found a disagreement about the payment (``kind``:
    ``duplicate_charge``, ``orphan_charge``, ``missing_charge``, ``mismatch``)."""

    finding_id: int
    kind: str


@_entry("finding_resolved")
@dataclass(frozen=True)
class FindingResolvedEntry(HistoryEntryBase):
    """A finding about the payment was resolved (``how``: ``refunded`` or ``manual``)."""

    finding_id: int
    how: str


@dataclass(frozen=True)
class UnknownHistoryEntry(HistoryEntryBase):
    """An entry of a ``type`` this SDK does not know (a newer server's): its
    common members, and every member as received in ``raw``."""


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
    CaptureReservedEntry,
    CaptureEndedEntry,
    ReleaseRequestedEntry,
    ReleaseEndedEntry,
    EventAttemptEntry,
    EventResentEntry,
    KeyExpiredEntry,
    FindingEntry,
    FindingResolvedEntry,
    UnknownHistoryEntry,
]



def history_entry(data: Mapping[str, Any]) -> HistoryEntry:
    """One history entry, by its ``type``; a type this SDK does not know is an
    :class:`UnknownHistoryEntry` (readable, never an error)."""
    if not isinstance(data, Mapping):
        raise TypeError(f"a history entry is an object, not {type(data).__name__}")
    kind = data.get("type")
    if not isinstance(kind, str):
        data, kind = {**data, "type": ""}, ""
    entry = HISTORY_ENTRY_TYPES.get(kind, UnknownHistoryEntry).from_json(data)
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
