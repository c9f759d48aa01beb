"""What a call ended with, and what each attempt saw. Pure values."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional, Union

from ._keys import IdempotencyKey
from ._models import Amount, Capture, Code, Payment, Problem, Refund


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
class Authorized:
    """The amount is held on the customer's card, nothing taken yet (an
    authorization: ``capture_method="manual"``, or the order's authorization
    found under another key). Captures take it (``capture``), a void or the
    expiry (``authorization_expires_at``) releases it. ``payment.status`` is
    ``authorized`` (or ``partially_captured``)."""

    payment: Payment


@dataclass(frozen=True)
class Uncertain:
    """The budget ran out before a definite answer: the payment may have been
    charged. **Do not pay again with a new key**: retry later with the same key,
    or look the order up."""

    payment_id: Optional[str] = None


Outcome = Union[Paid, Declined, Canceled, Authorized, Uncertain]


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

@dataclass(frozen=True)
class Captured:
    """The acquirer took the capture's amount (``capture.status`` ``succeeded``)."""

    capture: Capture


@dataclass(frozen=True)
class CaptureFailed:
    """The acquirer refused the capture (422 ``capture_failed``, a stored answer):
    nothing taken by it; its amount is capturable again, under a new key.
    ``capture.failure_code`` says why."""

    capture: Capture


@dataclass(frozen=True)
class CaptureRefused:
    """Refused before anything was executed (nothing reserved, nothing sent to
    the acquirer; the key is free): ``code`` says why —
    ``capture_exceeds_capturable`` (more than ``amount_capturable``),
    ``payment_not_capturable`` (``payment_status``: charged at once, not
    authorized yet, or its hold used up, voided or expired),
    ``currency_mismatch``, ``not_found``, or ``authorization_busy`` (a final
    capture or a void was still in flight when the budget ran out)."""

    problem: Problem

    @property
    def code(self) -> Code:
        return self.problem.code

    @property
    def status(self) -> int:
        return self.problem.status

    @property
    def amount_capturable(self) -> Optional[Amount]:
        return self.problem.amount_capturable

    @property
    def payment_status(self) -> Optional[str]:
        return self.problem.payment_status


@dataclass(frozen=True)
class CaptureUncertain:
    """The budget ran out while the capture was pending (or its answers lost):
    it may have taken the money. **Never capture again under a new key**:
    retry later with the same key (the service ends it on its own too)."""

    capture_id: Optional[str] = None


CaptureOutcome = Union[Captured, CaptureFailed, CaptureRefused, CaptureUncertain]


@dataclass(frozen=True)
class VoidVoided:
    """Nothing was captured: the payment is ``voided``, the hold released,
    nothing taken."""

    payment: Payment


@dataclass(frozen=True)
class VoidReleased:
    """Some was captured: the payment is ``succeeded`` with
    ``amount_captured`` taken and the rest of the hold released."""

    payment: Payment


@dataclass(frozen=True)
class VoidFailed:
    """The acquirer refused the void (422 ``void_failed``, a stored answer): the
    authorization is open again (``payment``); ``failure_code`` says why."""

    payment: Payment
    failure_code: Optional[str] = None


@dataclass(frozen=True)
class VoidRefused:
    """Refused before anything was executed: ``payment_not_voidable``
    (``payment_status``: charged at once — refund it instead — or its hold
    used up, voided or expired), ``not_found``, or ``authorization_busy``
    (captures still in flight when the budget ran out)."""

    problem: Problem

    @property
    def code(self) -> Code:
        return self.problem.code

    @property
    def status(self) -> int:
        return self.problem.status

    @property
    def payment_status(self) -> Optional[str]:
        return self.problem.payment_status


@dataclass(frozen=True)
class VoidUncertain:
    """The budget ran out while the void was in flight: retry later with the
    same key (the service ends it on its own too)."""

    payment_id: Optional[str] = None


VoidOutcome = Union[VoidVoided, VoidReleased, VoidFailed, VoidRefused, VoidUncertain]

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
        return self.outcome.payment if isinstance(self.outcome, (Paid, Declined, Canceled, Authorized)) else None


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


@dataclass(frozen=True)
class CaptureResult:
    outcome: CaptureOutcome
    key: IdempotencyKey
    attempts: List[Attempt]

    @property
    def replayed(self) -> bool:
        return bool(self.attempts) and self.attempts[-1].replayed

    @property
    def capture(self) -> Optional[Capture]:
        return self.outcome.capture if isinstance(self.outcome, (Captured, CaptureFailed)) else None


@dataclass(frozen=True)
class VoidResult:
    outcome: VoidOutcome
    key: IdempotencyKey
    attempts: List[Attempt]

    @property
    def replayed(self) -> bool:
        return bool(self.attempts) and self.attempts[-1].replayed

    @property
    def payment(self) -> Optional[Payment]:
        if isinstance(self.outcome, (VoidVoided, VoidReleased, VoidFailed)):
            return self.outcome.payment
        return None
