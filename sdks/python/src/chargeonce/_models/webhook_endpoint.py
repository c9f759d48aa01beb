"""A shop's webhook endpoint, as ``/v1/webhook-endpoints`` shows it. Pure: no I/O."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from .._decode import Wire
from .common import _LOCAL


@dataclass(frozen=True)
class WebhookEndpoint(Wire):
    """A webhook endpoint of the shop (``we_...``): where its events go.

    ``secret`` (the signing secret, ``whsec_...``) is set only in the answer
    to the request that made it (:meth:`Client.create_webhook_endpoint`,
    :meth:`Client.roll_webhook_endpoint_secret`). A repeat of that request
    under the same idempotency key answers the endpoint with ``secret=None``
    and ``replayed=True``. The secret is not in the ``repr``.
    """

    id: str
    #: Always ``webhook_endpoint``.
    object: str
    #: Where events are POSTed.
    url: str
    #: The event types it receives, sorted, or ``["*"]`` for every type.
    enabled_events: List[str]
    description: Optional[str]
    #: Whether events are delivered to it now (``False``: paused, open deliveries wait).
    enabled: bool
    #: ``True`` for the endpoint the operator set (``shops set-webhook``).
    managed_by_operator: bool
    created_at: str
    #: While a rolled-over secret still signs beside the new one: when it stops.
    previous_secret_expires_at: Optional[str]
    #: ``True`` for a live endpoint, ``False`` for test mode's (made with a
    #: ``sk_test_`` key; it receives only test events). ``True`` when the
    #: answer has no ``livemode`` (stored before test mode existed: live).
    livemode: bool = True
    #: The signing secret, in the answer that made it only: store it then.
    secret: Optional[str] = field(default=None, repr=False)
    #: Not a wire member: the answer was a replay of the idempotency key's
    #: first request (``Idempotent-Replayed: true``), which changed nothing
    #: and carries no secret.
    replayed: bool = field(default=False, metadata=_LOCAL)
    raw: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False, metadata=_LOCAL)
