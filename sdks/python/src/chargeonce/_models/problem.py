"""Problem documents (RFC 9457) and their stable codes. Pure: no I/O."""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Dict, Mapping, Optional, Union

from .common import _LOCAL, Amount, _opt
from .payment import Capture, Payment, Refund


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
    API_KEY_REVOKED = "api_key_revoked"
    API_KEY_EXPIRED = "api_key_expired"
    INSUFFICIENT_SCOPE = "insufficient_scope"
    API_KEY_LIMIT_REACHED = "api_key_limit_reached"
    API_KEY_INACTIVE = "api_key_inactive"
    WEBHOOK_ENDPOINT_LIMIT_REACHED = "webhook_endpoint_limit_reached"
    NO_WEBHOOK_ENDPOINT = "no_webhook_endpoint"
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
    CAPTURE_EXCEEDS_CAPTURABLE = "capture_exceeds_capturable"
    PAYMENT_NOT_CAPTURABLE = "payment_not_capturable"
    PAYMENT_NOT_VOIDABLE = "payment_not_voidable"
    AUTHORIZATION_BUSY = "authorization_busy"
    CAPTURE_FAILED = "capture_failed"
    VOID_FAILED = "void_failed"
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

    @property
    def capture(self) -> Optional[Capture]:
        """The capture a problem names (``capture_failed``, ``acquirer_unavailable`` of a capture)."""
        data = self.raw.get("capture")
        try:
            return Capture.from_json(data) if isinstance(data, dict) else None
        except (KeyError, TypeError, ValueError):
            return None

    @property
    def amount_capturable(self) -> Optional[Amount]:
        """What the authorization had left (``capture_exceeds_capturable``)."""
        data = self.raw.get("amount_capturable")
        try:
            return Amount.from_json(data) if isinstance(data, dict) else None
        except (KeyError, TypeError, ValueError):
            return None

    @property
    def payment_status(self) -> Optional[str]:
        """The payment's status (``payment_not_capturable``, ``payment_not_voidable``)."""
        return _opt(self.raw, "payment_status")

    @property
    def failure_code(self) -> Optional[str]:
        """Why the acquirer refused (``capture_failed``, ``void_failed``, ``refund_failed``)."""
        return _opt(self.raw, "failure_code")

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
