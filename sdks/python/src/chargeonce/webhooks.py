"""Verifying the merchant events chargeonce POSTs to a shop's webhook URL.

The ``Chargeonce-Signature`` header is ``t=<unix seconds>,v1=<hex>[,v1=<hex>...]``:
HMAC-SHA256 with the shop's signing secret over ``"{t}.{raw body}"``. Verify
the *raw* body bytes (before any JSON parsing), refuse timestamps more than
5 minutes away, and accept any of several ``v1`` signatures (secret rotation).
Pure: the clock is a parameter.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import time
from typing import Any, Optional, Union

SIGNATURE_HEADER = "Chargeonce-Signature"
#: The merchant event types this SDK knows (an event's ``type``); a newer
#: server may send others: keep them, never fail on them.
EVENT_TYPES = (
    "payment.succeeded",
    "payment.declined",
    "payment.canceled",
    "payment.authorized",
    "payment.voided",
    "payment.expired",
    "capture.succeeded",
    "capture.failed",
    "refund.succeeded",
    "refund.failed",
)
TOLERANCE_SECONDS = 300
MAX_SIGNATURES = 8
MAX_HEADER_BYTES = 1024
_HEX_LEN = 64
_HEX = frozenset("0123456789abcdefABCDEF")


class SignatureError(ValueError):
    """The event's signature does not hold. ``reason``: ``"malformed"``,
    ``"mismatch"`` or ``"outside_tolerance"``."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def _bytes(value: Union[str, bytes]) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else value


def _mac(secret: Union[str, bytes], timestamp: int, body: bytes) -> bytes:
    return hmac.new(_bytes(secret), str(timestamp).encode("ascii") + b"." + body, hashlib.sha256).digest()


def sign(secret: Union[str, bytes], timestamp: int, body: bytes) -> str:
    """The header value chargeonce sends: ``t={timestamp},v1={hex}``."""
    return f"t={timestamp},v1={_mac(secret, timestamp, body).hex()}"


def parse_signature_header(header: str) -> "tuple[int, list[bytes]]":
    """``(timestamp, signatures)``; exactly one ``t``, one to eight ``v1`` of 64
    hex digits, other parts ignored; else :class:`SignatureError` (malformed)."""
    malformed = SignatureError(
        "malformed",
        "the signature header is not `t=<unix seconds>,v1=<64 hex digits>` "
        f"(at most {MAX_SIGNATURES} v1 parts, at most {MAX_HEADER_BYTES} bytes)",
    )
    if len(header.encode("utf-8")) > MAX_HEADER_BYTES:
        raise malformed
    timestamp: Optional[int] = None
    signatures: "list[bytes]" = []
    for part in header.split(","):
        name, sep, value = part.strip().partition("=")
        if not sep:
            raise malformed
        if name == "t":
            if timestamp is not None or not value or len(value) > 19 or not (value.isascii() and value.isdigit()):
                raise malformed
            timestamp = int(value)
        elif name == "v1":
            if len(signatures) == MAX_SIGNATURES or len(value) != _HEX_LEN or not set(value) <= _HEX:
                raise malformed
            signatures.append(bytes.fromhex(value))
    if timestamp is None or not signatures:
        raise malformed
    return timestamp, signatures


def verify(
    secret: Union[str, bytes],
    header: Optional[str],
    body: bytes,
    now: Optional[float] = None,
    tolerance: float = TOLERANCE_SECONDS,
) -> None:
    """Raises :class:`SignatureError` unless ``header`` signs ``body`` with
    ``secret`` within ``tolerance`` seconds of ``now`` (default: the clock).
    Compares in constant time (``hmac.compare_digest``) against every ``v1``."""
    if len(secret) == 0:
        # An empty secret signs nothing: anyone could compute its MAC.
        raise ValueError("the webhook secret is empty: configure the shop's signing secret")
    if header is None:
        raise SignatureError("malformed", f"no {SIGNATURE_HEADER} header")
    timestamp, signatures = parse_signature_header(header)
    current = int(time.time() if now is None else now)
    age = abs(current - timestamp)
    if age > tolerance:
        raise SignatureError("outside_tolerance", f"the signature timestamp is {age} s away from now")
    expected = _mac(secret, timestamp, body)
    matched = False
    for candidate in signatures:
        matched |= hmac.compare_digest(candidate, expected)
    if not matched:
        raise SignatureError("mismatch", "the signature does not match")


def construct_event(
    secret: Union[str, bytes],
    header: Optional[str],
    body: bytes,
    now: Optional[float] = None,
    tolerance: float = TOLERANCE_SECONDS,
) -> Any:
    """:func:`verify`, then the event as parsed JSON (``id``, ``type``, ``data``).
    Deduplicate on ``id``: delivery is at least once."""
    verify(secret, header, body, now, tolerance)
    return json.loads(body)
