"""The ``Idempotency-Key``: a client-chosen name for one business operation.

Pure: no I/O. Mirrors ``chargeonce_core::IdempotencyKey`` point for point.
"""
from __future__ import annotations

import hashlib
import uuid
from typing import Union

MAX_LEN = 255


class InvalidKey(ValueError):
    """A key that the server would refuse (empty, too long, not visible ASCII)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        #: ``"empty"``, ``"too_long"`` or ``"invalid_character"``.
        self.reason = reason


def _validate(key: str) -> None:
    if key == "":
        raise InvalidKey("empty", "the key is empty")
    if len(key) > MAX_LEN:
        raise InvalidKey(
            "too_long", f"the key is {len(key)} characters long; at most {MAX_LEN} are allowed"
        )
    for position, char in enumerate(key):
        if not 0x21 <= ord(char) <= 0x7E:
            raise InvalidKey(
                "invalid_character",
                f"the key has a character that is not visible ASCII at position {position}",
            )


def _encode(text: str) -> str:
    """Percent-encodes every UTF-8 byte that is not visible ASCII, and ``%``."""
    out = []
    for byte in text.encode("utf-8"):
        if 0x21 <= byte <= 0x7E and byte != 0x25:
            out.append(chr(byte))
        else:
            out.append(f"%{byte:02X}")
    return "".join(out)


class IdempotencyKey:
    """A valid idempotency key: 1 to 255 visible ASCII characters.

    Make keys with :meth:`for_operation`, from the *intent* (pay order 123),
    never from the attempt. ``repr`` never shows the raw key (it may carry
    customer data), only :meth:`log_id`.
    """

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        _validate(value)
        self._value = value

    @classmethod
    def for_operation(cls, subject: str, operation: str) -> "IdempotencyKey":
        """``{subject}-{operation}``, with non-visible-ASCII bytes and ``%`` percent-encoded.

        >>> IdempotencyKey.for_operation("order-123", "pay").value
        'order-123-pay'
        >>> IdempotencyKey.for_operation("заказ 7", "pay").value
        '%D0%B7%D0%B0%D0%BA%D0%B0%D0%B7%207-pay'
        """
        key = f"{_encode(subject)}-{_encode(operation)}"
        if subject == "" or operation == "":
            raise InvalidKey("empty", "the key is empty")
        return cls(key)

    @classmethod
    def random_for_this_process_only(cls) -> "IdempotencyKey":
        """``rnd-`` and 32 hex digits: protects only while this process lives and
        only if every retry reuses this very value. A restart after sending and
        before learning the outcome makes a new key: a second charge. Prefer
        :meth:`for_operation`."""
        return cls(f"rnd-{uuid.uuid4().hex}")

    @property
    def value(self) -> str:
        """The key as sent in the header."""
        return self._value

    def log_id(self) -> str:
        """The first 12 hex digits of the key's SHA-256: safe to log."""
        return hashlib.sha256(self._value.encode("ascii")).hexdigest()[:12]

    def __str__(self) -> str:
        return self.log_id()

    def __repr__(self) -> str:
        return f"IdempotencyKey({self.log_id()})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IdempotencyKey) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


KeyLike = Union[IdempotencyKey, str]


def as_key(key: KeyLike) -> IdempotencyKey:
    return key if isinstance(key, IdempotencyKey) else IdempotencyKey(key)
