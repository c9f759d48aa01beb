"""A shop's API key, as ``/v1/api-keys`` shows it. Pure: no I/O."""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Dict, Optional

from .._decode import Wire
from .common import _LOCAL


class ApiKeyScope(str, Enum):
    """What a key may do."""

    #: Everything, managing keys included.
    FULL = "full"
    #: Every read; no POST.
    READ_ONLY = "read_only"
    #: Money moves, and reading back one payment, refund or capture by id.
    PAYMENTS = "payments"


class ApiKeyState(str, Enum):
    """Whether a key works now."""

    ACTIVE = "active"
    #: Its expiry has passed (a roll sets one on the key it replaces).
    EXPIRED = "expired"
    REVOKED = "revoked"


@dataclass(frozen=True)
class ApiKey(Wire):
    """An API key of the shop (``key_...``).

    ``secret`` is set only in the answer to the request that made the key
    (:meth:`Client.create_api_key`, :meth:`Client.roll_api_key`): the
    service keeps only its hash. A repeat of that request under the same
    idempotency key answers the same key with ``secret=None`` and
    ``replayed=True``. The secret is not in the ``repr``.
    """

    id: str
    object: str
    livemode: bool
    #: ``full``, ``read_only`` or ``payments`` (an :class:`ApiKeyScope` value).
    scope: str
    #: The visible start of its secret (``sk_live_4f3a``); ``None`` for a
    #: shop's first secret.
    prefix: Optional[str]
    description: Optional[str]
    #: ``active``, ``expired`` or ``revoked`` (an :class:`ApiKeyState` value).
    state: str
    created_at: str
    expires_at: Optional[str]
    revoked_at: Optional[str]
    #: When it last authenticated a request, to the minute; ``None`` if never.
    last_used_at: Optional[str]
    #: The secret, in the answer that made the key only: store it then.
    secret: Optional[str] = field(default=None, repr=False)
    #: Not a wire member: the answer was a replay of the idempotency key's
    #: first request (``Idempotent-Replayed: true``), which made nothing and
    #: carries no secret.
    replayed: bool = field(default=False, metadata=_LOCAL)
    raw: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False, metadata=_LOCAL)
