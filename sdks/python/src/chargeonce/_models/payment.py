"""Payments, refunds and captures, as the API shows them. Pure: no I/O."""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Dict, Mapping, Optional

from .._decode import Wire
from .common import _LOCAL, Amount, _livemode, _opt


class PaymentStatus(str, Enum):
    PENDING = "pending"
    SUCCEEDED = "succeeded"
    DECLINED = "declined"
    #: Canceled while pending (``POST /v1/payments/{id}/cancel``, or the service
    #: gave up on it): nothing was taken, and its order may be paid again.
    CANCELED = "canceled"
    #: An authorization (``capture_method`` ``manual``): the amount is held,
    #: nothing taken yet; captures take it, a void or the expiry releases it.
    AUTHORIZED = "authorized"
    #: Some of the authorization captured, more still capturable.
    PARTIALLY_CAPTURED = "partially_captured"
    #: Voided with nothing captured: nothing was taken, the hold released.
    VOIDED = "voided"
    #: Nobody captured it before ``authorization_expires_at``: nothing was
    #: taken, the hold released.
    EXPIRED = "expired"


class CaptureMethod(str, Enum):
    """How a payment takes its money: at once, or authorized for captures."""

    AUTOMATIC = "automatic"
    MANUAL = "manual"


class CaptureStatus(str, Enum):
    PENDING = "pending"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


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
    #: ``automatic`` (charged at once) or ``manual`` (authorized for captures):
    #: a :class:`CaptureMethod` value, kept as received.
    capture_method: str
    #: What captures may still take (``0`` for a payment charged at once, and
    #: once the hold is used up, voided or expired).
    amount_capturable: Amount
    #: What was taken: the amount of a payment charged at once that
    #: succeeded, the succeeded captures of an authorization.
    amount_captured: Amount
    #: When an authorization is released unless captured (RFC 3339);
    #: ``None`` for a payment charged at once.
    authorization_expires_at: Optional[str]
    #: The shop's own pairs, as its request gave them (``{}`` when none).
    metadata: Dict[str, str] = field(default_factory=dict)
    #: ``True`` for live mode (real money, the acquirer), ``False`` for test
    #: mode (a ``sk_test_`` key's, the simulator's). ``True`` when the answer
    #: has no ``livemode`` (stored before test mode existed: live).
    livemode: bool = True
    raw: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False, metadata=_LOCAL)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Payment":
        refunded = data.get("amount_refunded")
        amount = Amount.from_json(data["amount"])
        status = str(data["status"])
        zero = Amount("0", amount.currency)
        capturable = data.get("amount_capturable")
        captured = data.get("amount_captured")
        return cls(
            id=str(data["id"]),
            object=str(data.get("object", "payment")),
            shop_id=str(data["shop_id"]),
            status=status,
            amount=amount,
            reference=str(data["reference"]),
            provider_payment_id=_opt(data, "provider_payment_id"),
            decline_code=_opt(data, "decline_code"),
            created_at=str(data["created_at"]),
            # Both are absent only from a server from before refunds: nothing refunded.
            amount_refunded=Amount.from_json(refunded) if refunded else Amount("0", amount.currency),
            refund_status=str(data.get("refund_status") or "none"),
            # The four are absent only from answers stored before authorizations
            # existed: a payment charged at once, whose captured amount is its
            # amount once it succeeded.
            capture_method=str(data.get("capture_method") or CaptureMethod.AUTOMATIC.value),
            amount_capturable=Amount.from_json(capturable) if capturable else zero,
            amount_captured=(
                Amount.from_json(captured) if captured else amount if status == PaymentStatus.SUCCEEDED.value else zero
            ),
            authorization_expires_at=_opt(data, "authorization_expires_at"),
            # Absent only from answers stored before metadata existed.
            metadata={str(k): str(v) for k, v in (data.get("metadata") or {}).items()},
            livemode=_livemode(data),
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
    #: ``True`` for live mode (real money, the acquirer), ``False`` for test
    #: mode (a ``sk_test_`` key's, the simulator's). ``True`` when the answer
    #: has no ``livemode`` (stored before test mode existed: live).
    livemode: bool = True
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
            livemode=_livemode(data),
            raw=dict(data),
        )


@dataclass(frozen=True)
class Capture(Wire):
    """One capture of (part of) an authorized payment (``cap_...``)."""

    id: str
    object: str
    payment_id: str
    shop_id: str
    #: ``pending``, ``succeeded`` or ``failed`` (a :class:`CaptureStatus` value).
    status: str
    #: The amount taken, in the payment's currency.
    amount: Amount
    #: The last capture: once it succeeded, the rest of the authorization was released.
    final: bool
    provider_capture_id: Optional[str]
    failure_code: Optional[str]
    created_at: str
    #: ``True`` for live mode (real money, the acquirer), ``False`` for test
    #: mode (a ``sk_test_`` key's, the simulator's). ``True`` when the answer
    #: has no ``livemode`` (stored before test mode existed: live).
    livemode: bool = True
    raw: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False, metadata=_LOCAL)
