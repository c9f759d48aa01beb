"""The API's resources as typed, immutable values, a module per resource.
Pure: no I/O.

Money is a decimal string (``"15.00"``), never a float. Every model keeps the
JSON it was read from in ``raw``. Fields whose metadata says ``wire=False`` are
not members of the wire schema (the contract test skips them). A model's
members are its fields: one decoder reads them all (``_decode.decode``); the
few ``from_json`` written out keep what older servers sent.
"""
from .api_key import ApiKey, ApiKeyScope, ApiKeyState
from .common import Amount, Page
from .history import (
    HISTORY_ENTRY_TYPES,
    AcquirerCallEntry,
    AnsweredEntry,
    CancelRequestedEntry,
    ClaimedEntry,
    EventAttemptEntry,
    EventResentEntry,
    FindingEntry,
    FindingResolvedEntry,
    HistoryAcquirerCall,
    HistoryCallOutcome,
    HistoryEntry,
    HistoryEntryBase,
    HistoryKey,
    HistorySettledBy,
    HistoryTally,
    KeyExpiredEntry,
    LinkedEntry,
    PaymentHistory,
    RefundEndedEntry,
    RefundReservedEntry,
    CaptureEndedEntry,
    CaptureReservedEntry,
    ReleaseEndedEntry,
    ReleaseRequestedEntry,
    SettledEntry,
    TakenOverEntry,
    UnknownHistoryEntry,
    WebhookReceivedEntry,
    history_entry,
)
from .key import IdempotencyKeyInfo
from .payment import Capture, CaptureMethod, CaptureStatus, Payment, PaymentStatus, Refund
from .problem import Code, Problem, ProblemCode, parse_code
from .webhook_endpoint import WebhookEndpoint

__all__ = [
    "HISTORY_ENTRY_TYPES",
    "AcquirerCallEntry",
    "Amount",
    "AnsweredEntry",
    "ApiKey",
    "ApiKeyScope",
    "ApiKeyState",
    "WebhookEndpoint",
    "CancelRequestedEntry",
    "Capture",
    "CaptureMethod",
    "CaptureStatus",
    "ClaimedEntry",
    "Code",
    "EventAttemptEntry",
    "EventResentEntry",
    "FindingEntry",
    "FindingResolvedEntry",
    "HistoryAcquirerCall",
    "HistoryCallOutcome",
    "HistoryEntry",
    "HistoryEntryBase",
    "HistoryKey",
    "HistorySettledBy",
    "HistoryTally",
    "IdempotencyKeyInfo",
    "KeyExpiredEntry",
    "LinkedEntry",
    "Page",
    "Payment",
    "PaymentHistory",
    "PaymentStatus",
    "Problem",
    "ProblemCode",
    "Refund",
    "RefundEndedEntry",
    "RefundReservedEntry",
    "CaptureEndedEntry",
    "CaptureReservedEntry",
    "ReleaseEndedEntry",
    "ReleaseRequestedEntry",
    "SettledEntry",
    "TakenOverEntry",
    "UnknownHistoryEntry",
    "WebhookReceivedEntry",
    "history_entry",
    "parse_code",
]
