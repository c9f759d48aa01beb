"""Payments and refunds, as the API shows them. Pure: no I/O."""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Dict, Mapping, Optional

from .common import _LOCAL, Amount, _opt


class PaymentStatus(str, Enum):
    PENDING = "pending"
    SUCCEEDED = "succeeded"
    DECLINED = "declined"
    #: Canceled while pending (``POST /v1/payments/{id}/cancel``, or the service
    #: gave up on it): nothing was taken, and its order may be paid again.
    CANCELED = "canceled"


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
    #: The shop's own pairs, as its request gave them (``{}`` when none).
    metadata: Dict[str, str] = field(default_factory=dict)
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
            # Absent only from answers stored before metadata existed.
            metadata={str(k): str(v) for k, v in (data.get("metadata") or {}).items()},
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
