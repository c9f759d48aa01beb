"""What a call ended with, and what each attempt saw. Pure values."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional, Union

from ._keys import IdempotencyKey
from ._models import Code, Payment, Refund


@dataclass(frozen=True)
class Paid:
    """Charged (by this call, an earlier attempt of the same intent, or earlier for the order)."""

    payment: Payment


@dataclass(frozen=True)
class Declined:
    """Declined by the acquirer: definite, nothing charged."""

    payment: Payment


@dataclass(frozen=True)
class Canceled:
    """The payment was canceled before any charge was found (a cancel of it, or
    the service gave up on it): definite, nothing taken. The order may be paid
    again under a new key."""

    payment: Payment


@dataclass(frozen=True)
class Uncertain:
    """The budget ran out before a definite answer: the payment may have been
    charged. **Do not pay again with a new key**: retry later with the same key,
    or look the order up."""

    payment_id: Optional[str] = None


Outcome = Union[Paid, Declined, Canceled, Uncertain]


@dataclass(frozen=True)
class Refunded:
    refund: Refund


@dataclass(frozen=True)
class RefundFailed:
    """The acquirer refused: nothing given back; refundable again under a new key."""

    refund: Refund


@dataclass(frozen=True)
class RefundUncertain:
    refund_id: Optional[str] = None


RefundOutcome = Union[Refunded, RefundFailed, RefundUncertain]


@dataclass(frozen=True)
class CancelCanceled:
    """The cancel ended the payment ``canceled``: no charge was found after the
    settle window, nothing was taken (a charge that lands later is refunded by
    the service)."""

    payment: Payment


@dataclass(frozen=True)
class CancelRefunded:
    """The charge was found: the payment is kept ``succeeded`` and was refunded
    in full."""

    payment: Payment


@dataclass(frozen=True)
class CancelCharged:
    """The charge was found and kept, but not refunded in full (the acquirer
    refused the refund, or part was refunded already): the customer holds
    ``amount - amount_refunded``."""

    payment: Payment


@dataclass(frozen=True)
class CancelDeclined:
    """The acquirer had declined the charge: nothing taken."""

    payment: Payment


@dataclass(frozen=True)
class CancelUncertain:
    """The budget ran out while the cancel still ran (the charge is looked up
    only once the settle window has passed): retry later with the same key;
    the service ends it on its own too."""

    payment_id: Optional[str] = None


CancelOutcome = Union[CancelCanceled, CancelRefunded, CancelCharged, CancelDeclined, CancelUncertain]

#: Why an attempt got no HTTP answer.
CONNECT = "connect"  # not sent: always safe to retry
TIMEOUT = "timeout"  # sent, no answer in time: may have executed
LOST = "lost"  # sent, the connection broke: may have executed


@dataclass(frozen=True)
class Attempt:
    """One attempt of a call: an HTTP answer (``status``) or a failure (``failure``)."""

    number: int
    took: float
    status: Optional[int] = None
    replayed: bool = False
    waited: bool = False
    problem: Optional[Code] = None
    payment_status: Optional[str] = None
    failure: Optional[str] = None
    message: Optional[str] = None
    body: Optional[bytes] = field(default=None, repr=False)
    retry_in: Optional[float] = None

    def describe(self) -> str:
        if self.status is None:
            return f"{self.failure}: {self.message}"
        text = str(self.status)
        if self.problem is not None:
            text += f" {self.problem if isinstance(self.problem, str) else self.problem.value}"
        if self.payment_status:
            text += f" (payment {self.payment_status})"
        if self.replayed:
            text += ", replayed"
        if self.waited:
            text += ", after waiting on the server (Prefer: wait)"
        return text


@dataclass(frozen=True)
class PayResult:
    outcome: Outcome
    key: IdempotencyKey
    attempts: List[Attempt]
    #: ``pay_order`` found the order already paid and sent nothing.
    found_before_paying: bool = False

    @property
    def replayed(self) -> bool:
        return bool(self.attempts) and self.attempts[-1].replayed

    @property
    def payment(self) -> Optional[Payment]:
        return self.outcome.payment if isinstance(self.outcome, (Paid, Declined, Canceled)) else None


@dataclass(frozen=True)
class CancelResult:
    outcome: CancelOutcome
    key: IdempotencyKey
    attempts: List[Attempt]

    @property
    def replayed(self) -> bool:
        return bool(self.attempts) and self.attempts[-1].replayed

    @property
    def payment(self) -> Optional[Payment]:
        return None if isinstance(self.outcome, CancelUncertain) else self.outcome.payment


@dataclass(frozen=True)
class RefundResult:
    outcome: RefundOutcome
    key: IdempotencyKey
    attempts: List[Attempt]

    @property
    def replayed(self) -> bool:
        return bool(self.attempts) and self.attempts[-1].replayed

    @property
    def refund(self) -> Optional[Refund]:
        return self.outcome.refund if isinstance(self.outcome, (Refunded, RefundFailed)) else None
