"""An idempotency key, as introspection shows it. Pure: no I/O."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional

from .common import _LOCAL, _opt


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
