"""chargeonce: a client of the idempotent payment API.

Keys come from the intent (:meth:`IdempotencyKey.for_operation`); every retry
sends the same key and the same body bytes; a payment ends :class:`Paid`,
:class:`Declined`, :class:`Canceled`, :class:`Authorized` or :class:`Uncertain`
(never "try again with a new key"); a pending payment is canceled with
``cancel``; an authorization (``authorize``) is taken by ``capture`` and
released by ``void``. A shop manages its own API keys with
``create_api_key``, ``roll_api_key`` and ``revoke_api_key`` (an
:class:`ApiKey`'s ``secret`` is shown once), and where its events go with
``create_webhook_endpoint``, ``update_webhook_endpoint``,
``roll_webhook_endpoint_secret`` and ``delete_webhook_endpoint`` (a
:class:`WebhookEndpoint`'s signing ``secret`` is shown once).
"""
from ._client import (
    AsyncClient,
    Client,
    api_key_body,
    capture_body,
    payment_body,
    refund_body,
    roll_api_key_body,
    roll_webhook_endpoint_secret_body,
    update_webhook_endpoint_body,
    webhook_endpoint_body,
)
from ._errors import (
    ChargeonceError,
    ConfigError,
    KeyReused,
    OrderAlreadyPaid,
    PaymentNotCancelable,
    ProblemError,
    Unavailable,
    UnexpectedAnswer,
)
from ._keys import IdempotencyKey, InvalidKey
from ._models import (
    AcquirerCallEntry,
    Amount,
    AnsweredEntry,
    ApiKey,
    ApiKeyScope,
    ApiKeyState,
    WebhookEndpoint,
    CancelRequestedEntry,
    Capture,
    CaptureMethod,
    CaptureStatus,
    ClaimedEntry,
    EventAttemptEntry,
    EventResentEntry,
    FindingEntry,
    FindingResolvedEntry,
    HISTORY_ENTRY_TYPES,
    HistoryAcquirerCall,
    HistoryCallOutcome,
    HistoryEntry,
    HistoryEntryBase,
    HistoryKey,
    HistorySettledBy,
    HistoryTally,
    IdempotencyKeyInfo,
    KeyExpiredEntry,
    LinkedEntry,
    Page,
    Payment,
    PaymentHistory,
    PaymentStatus,
    Problem,
    ProblemCode,
    Refund,
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
)
from ._outcome import (
    Attempt,
    Authorized,
    CancelCanceled,
    CancelCharged,
    CancelDeclined,
    CancelOutcome,
    CancelRefunded,
    CancelResult,
    CancelUncertain,
    Canceled,
    CaptureFailed,
    Captured,
    CaptureOutcome,
    CaptureRefused,
    CaptureResult,
    CaptureUncertain,
    Declined,
    Outcome,
    Paid,
    PayResult,
    RefundFailed,
    Refunded,
    RefundOutcome,
    RefundResult,
    RefundUncertain,
    Uncertain,
    VoidFailed,
    VoidOutcome,
    VoidRefused,
    VoidReleased,
    VoidResult,
    VoidUncertain,
    VoidVoided,
)
from ._retry import RetryPolicy, is_transient, parse_retry_after
from . import webhooks

__version__ = "0.1.0"

__all__ = [
    "Amount", "AsyncClient", "Attempt", "CancelCanceled", "CancelCharged", "CancelDeclined",
    "CancelOutcome", "CancelRefunded", "Capture", "CaptureMethod", "CaptureStatus", "CancelResult", "CancelUncertain", "Canceled", "ChargeonceError", "Client", "ConfigError", "Declined",
    "IdempotencyKey", "IdempotencyKeyInfo", "InvalidKey", "KeyReused", "OrderAlreadyPaid", "Outcome", "Page", "Paid",
    "PayResult", "Payment", "PaymentNotCancelable", "PaymentStatus", "Problem", "ProblemCode", "ProblemError", "Refund",
    "RefundFailed", "RefundOutcome", "RefundResult", "RefundUncertain", "Refunded", "RetryPolicy",
    "Unavailable", "Uncertain", "UnexpectedAnswer", "is_transient", "parse_retry_after",
    "payment_body", "refund_body", "webhooks",
    # Authorizations: authorize, capture in parts, void.
    "Authorized", "capture_body", "CaptureFailed", "Captured", "CaptureOutcome", "CaptureRefused", "CaptureResult",
    "CaptureUncertain", "VoidFailed", "VoidOutcome", "VoidRefused", "VoidReleased", "VoidResult", "VoidUncertain",
    "VoidVoided",
    # A payment's history (GET /v1/payments/{id}/history).
    "AcquirerCallEntry", "AnsweredEntry", "CancelRequestedEntry", "ClaimedEntry", "EventAttemptEntry", "EventResentEntry",
    "FindingEntry", "FindingResolvedEntry", "HISTORY_ENTRY_TYPES", "HistoryAcquirerCall",
    "HistoryCallOutcome", "HistoryEntry", "HistoryEntryBase", "HistoryKey", "HistorySettledBy",
    "HistoryTally", "KeyExpiredEntry", "LinkedEntry", "PaymentHistory", "RefundEndedEntry",
    "RefundReservedEntry", "SettledEntry", "TakenOverEntry", "UnknownHistoryEntry", "WebhookReceivedEntry",
    "CaptureReservedEntry", "CaptureEndedEntry", "ReleaseRequestedEntry", "ReleaseEndedEntry",
    # The shop's API keys (/v1/api-keys).
    "ApiKey", "ApiKeyScope", "ApiKeyState", "api_key_body", "roll_api_key_body",
    # The shop's webhook endpoints (/v1/webhook-endpoints).
    "WebhookEndpoint", "webhook_endpoint_body", "update_webhook_endpoint_body", "roll_webhook_endpoint_secret_body",
]
