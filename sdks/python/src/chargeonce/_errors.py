"""Why a call failed. A payment whose outcome is unknown is never an error: it
is :class:`~chargeonce.Uncertain`."""
from __future__ import annotations

from typing import Optional

from ._models import Code, Payment, Problem, ProblemCode


class ChargeonceError(Exception):
    """Every error this SDK raises."""

    attempts: int = 0


class ConfigError(ChargeonceError):
    pass


class ProblemError(ChargeonceError):
    """The server refused with a problem document (a 4xx, or a read's error)."""

    def __init__(self, problem: Problem, attempts: int = 1) -> None:
        code = problem.code if isinstance(problem.code, str) else problem.code.value
        super().__init__(f"{problem.status} {code}: {problem.detail}")
        self.problem = problem
        self.attempts = attempts

    @property
    def code(self) -> Code:
        return self.problem.code

    @property
    def status(self) -> int:
        return self.problem.status

    @property
    def request_id(self) -> Optional[str]:
        return self.problem.request_id

    @property
    def detail(self) -> str:
        return self.problem.detail


class KeyReused(ProblemError):
    """422 ``idempotency_key_reused``: the key was first used for another request.
    A client bug; nothing was executed. Never retried."""


class OrderAlreadyPaid(ProblemError):
    """409 ``order_already_paid``: the order already has a payment (succeeded, or
    pending) for another amount or currency, so nothing was charged for this
    request. Also raised when an answer (or :meth:`Client.pay_order`'s look-up)
    names a payment that is not the one asked for. Never "paid": the cart and
    the payment disagree, and a person must look. Never retried."""

    @classmethod
    def of(cls, payment: Payment, attempts: int) -> "OrderAlreadyPaid":
        """Found by the client itself: an answer, or a look-up, whose payment is
        another amount, currency or order than the request's."""
        problem = Problem(
            type="urn:chargeonce:problem:order_already_paid",
            title="The order is already paid with another amount",
            status=409,
            detail=(
                f"order {payment.reference} has a {payment.status} payment {payment.id} of "
                f"{payment.amount.value} {payment.amount.currency}: not the one asked for"
            ),
            code=ProblemCode.ORDER_ALREADY_PAID,
            request_id=None,
            raw={"payment": payment.raw},
        )
        return cls(problem, attempts)

    @property
    def payment(self) -> Optional[Payment]:
        """The order's payment."""
        return self.problem.payment


class PaymentNotCancelable(ProblemError):
    """409 ``payment_not_cancelable``: the payment was already final (succeeded or
    declined) when the cancel came, so the cancel changed nothing. Its
    ``payment`` says which: succeeded, refund it instead; declined, nothing was
    taken. A stored answer (replayed to the same key); never retried."""

    @property
    def payment(self) -> Optional[Payment]:
        """The payment, as it was when the cancel came."""
        return self.problem.payment


class UnexpectedAnswer(ChargeonceError):
    """An answer that is neither the resource nor its problem document."""

    def __init__(self, status: int, body: str, attempts: int) -> None:
        super().__init__(f"unexpected answer {status}: {body}")
        self.status = status
        self.body = body
        self.attempts = attempts


class Unavailable(ChargeonceError):
    """A read got no answer within the retry budget."""

    def __init__(self, last: str, attempts: int) -> None:
        super().__init__(f"no answer within the retry budget after {attempts} attempts: {last}")
        self.last = last
        self.attempts = attempts
