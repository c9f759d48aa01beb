"""What an answer means and what to do next: the retry loop as a state
machine, without I/O (the sans-I/O core shared by ``Client`` and ``AsyncClient``).

A transport feeds :class:`KeyedCall` each attempt's answer (or failure) and
does what the returned decision says: send again after ``Sleep.seconds``,
return ``Done.value``, or raise ``Fail.error``.
"""
from __future__ import annotations

import dataclasses
import json
import random
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Generic, List, Mapping, Optional, Tuple, TypeVar, Union

from ._errors import (
    ChargeonceError,
    KeyReused,
    OrderAlreadyPaid,
    PaymentNotCancelable,
    ProblemError,
    Unavailable,
    UnexpectedAnswer,
)
from ._models import Amount, ApiKey, Capture, Payment, Problem, ProblemCode, Refund, WebhookEndpoint
from ._outcome import (
    CONNECT,
    Attempt,
    Authorized,
    CancelCanceled,
    CancelCharged,
    CancelDeclined,
    CancelRefunded,
    CancelUncertain,
    Canceled,
    CaptureFailed,
    Captured,
    CaptureRefused,
    CaptureUncertain,
    Declined,
    Paid,
    RefundFailed,
    Refunded,
    RefundUncertain,
    Uncertain,
    VoidFailed,
    VoidRefused,
    VoidReleased,
    VoidUncertain,
    VoidVoided,
)
from ._retry import RetryPolicy, is_transient, parse_retry_after

BODY_EXCERPT = 300


@dataclass(frozen=True)
class Answer:
    """A raw HTTP answer; header names lower-case."""

    status: int
    headers: Mapping[str, str]
    body: bytes

    def header(self, name: str) -> Optional[str]:
        return self.headers.get(name.lower())

    def retry_after(self, now: Optional[float] = None) -> Optional[float]:
        value = self.header("retry-after")
        if value is None:
            return None
        return parse_retry_after(value, time.time() if now is None else now)

    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except (ValueError, UnicodeDecodeError):
            return None

    def problem(self) -> Optional[Problem]:
        if "json" not in (self.header("content-type") or ""):
            return None
        data = self.json()
        return Problem.from_json(data, self.status) if isinstance(data, dict) else None

    def excerpt(self) -> str:
        return self.body.decode("utf-8", "replace")[:BODY_EXCERPT]

    @property
    def replayed(self) -> bool:
        return self.header("idempotent-replayed") == "true"

    @property
    def waited(self) -> bool:
        return (self.header("preference-applied") or "").lstrip().startswith("wait")


@dataclass(frozen=True)
class Done:
    value: Any
    #: ``value`` is a refusal before executing (a capture's or void's
    #: ``*Refused``): after an attempt that may have executed it proves
    #: nothing, and the call ends uncertain, as for a raised refusal.
    refusal: bool = False


@dataclass(frozen=True)
class Retry:
    retry_after: Optional[float]
    #: The answer proves this key executed nothing (409 ``authorization_busy``):
    #: the outcome when the budget ends here and no earlier attempt may have
    #: executed (else uncertain).
    refused: Any = None


@dataclass(frozen=True)
class Fail:
    error: ChargeonceError


Step = Union[Done, Retry, Fail]


@dataclass(frozen=True)
class Sleep:
    seconds: float


Decision = Union[Done, Sleep, Fail]


def _seen(answer: Answer, number: int, took: float, problem: Optional[Problem], payment_status: Optional[str]) -> Attempt:
    return Attempt(
        number=number,
        took=took,
        status=answer.status,
        replayed=answer.replayed,
        waited=answer.waited,
        problem=problem.code if problem else None,
        payment_status=payment_status,
        body=answer.body,
    )


def _payment(data: Any) -> Optional[Payment]:
    try:
        return Payment.from_json(data) if isinstance(data, dict) else None
    except (KeyError, TypeError, ValueError):
        return None


def _capture(data: Any) -> Optional[Capture]:
    try:
        return Capture.from_json(data) if isinstance(data, dict) else None
    except (KeyError, TypeError, ValueError):
        return None


def _refund(data: Any) -> Optional[Refund]:
    try:
        return Refund.from_json(data) if isinstance(data, dict) else None
    except (KeyError, TypeError, ValueError):
        return None


Judge = Callable[[Answer, int, float], Tuple[Attempt, Step, Optional[str]]]


def judge_payment(answer: Answer, number: int, took: float) -> Tuple[Attempt, Step, Optional[str]]:
    """Reads one answer of ``POST /v1/payments``: what it saw, the next step,
    and the payment id it named."""
    status = answer.status
    if 200 <= status <= 202:
        payment = _payment(answer.json())
        seen = _seen(answer, number, took, None, payment.status if payment else None)
        if payment is None:
            # A success status without a readable payment: unknown; ask again.
            return seen, Retry(answer.retry_after()), None
        if payment.status == "succeeded" and status != 202:
            return seen, Done(Paid(payment)), payment.id
        if payment.status == "declined" and status != 202:
            return seen, Done(Declined(payment)), payment.id
        if payment.status in HELD and status != 202:
            return seen, Done(Authorized(payment)), payment.id
        return seen, Retry(answer.retry_after()), payment.id
    problem = answer.problem()
    named = problem.payment if problem else None
    seen = _seen(answer, number, took, problem, named.status if named else None)
    named_id = named.id if named else None
    if status == 402 and problem is not None and problem.code == ProblemCode.PAYMENT_DECLINED:
        if named is not None:
            return seen, Done(Declined(named)), named_id
        return seen, Fail(UnexpectedAnswer(status, answer.excerpt(), number)), named_id
    if status == 409 and problem is not None and problem.code == ProblemCode.ORDER_ALREADY_PAID:
        return seen, Fail(OrderAlreadyPaid(problem, number)), named_id
    if status == 409 and problem is not None and problem.code == ProblemCode.PAYMENT_CANCELED:
        if named is not None:
            return seen, Done(Canceled(named)), named_id
        return seen, Fail(UnexpectedAnswer(status, answer.excerpt(), number)), named_id
    return seen, not_definite(answer, problem, number), named_id


#: The statuses of an authorization that still holds money for captures.
HELD = ("authorized", "partially_captured")


def _cancel_ended(payment: Payment) -> Any:
    """What a cancel's 200 says, by the payment it ended with; ``None`` for a
    payment still pending (not ended: ask again)."""
    if payment.status == "canceled":
        return CancelCanceled(payment)
    if payment.status == "declined":
        return CancelDeclined(payment)
    if payment.status == "succeeded":
        refunded = payment.amount_refunded.decimal >= payment.amount.decimal
        return CancelRefunded(payment) if refunded else CancelCharged(payment)
    return None


def judge_cancel(answer: Answer, number: int, took: float) -> Tuple[Attempt, Step, Optional[str]]:
    """Reads one answer of ``POST /v1/payments/{id}/cancel``: a 200 ends it (the
    payment says how), a 202 is asked again, ``payment_not_cancelable`` (409,
    stored) is :class:`PaymentNotCancelable`."""
    status = answer.status
    if 200 <= status <= 202:
        payment = _payment(answer.json())
        seen = _seen(answer, number, took, None, payment.status if payment else None)
        if payment is None:
            return seen, Retry(answer.retry_after()), None
        ended = _cancel_ended(payment) if status == 200 else None
        if ended is not None:
            return seen, Done(ended), payment.id
        return seen, Retry(answer.retry_after()), payment.id
    problem = answer.problem()
    named = problem.payment if problem else None
    seen = _seen(answer, number, took, problem, named.status if named else None)
    named_id = named.id if named else None
    if status == 409 and problem is not None and problem.code == ProblemCode.PAYMENT_NOT_CANCELABLE:
        return seen, Fail(PaymentNotCancelable(problem, number)), named_id
    return seen, not_definite(answer, problem, number), named_id


def answers_request(payment: Payment, amount: Amount, reference: str) -> bool:
    """Whether ``payment`` is the request's: the same order, amount and currency
    (amounts compared as decimals). Only then is it paid for this request."""
    return (
        payment.reference == reference
        and payment.amount.currency == amount.currency
        and payment.amount.decimal == amount.decimal
    )


def judge_refund(answer: Answer, number: int, took: float) -> Tuple[Attempt, Step, Optional[str]]:
    """Reads one answer of ``POST /v1/payments/{id}/refunds``."""
    status = answer.status
    if 200 <= status <= 202:
        refund = _refund(answer.json())
        seen = _seen(answer, number, took, None, None)
        if refund is None:
            return seen, Retry(answer.retry_after()), None
        if refund.status == "succeeded" and status != 202:
            return seen, Done(Refunded(refund)), refund.id
        return seen, Retry(answer.retry_after()), refund.id
    problem = answer.problem()
    seen = _seen(answer, number, took, problem, None)
    refund = problem.refund if problem else None
    named_id = refund.id if refund else None
    if status == 422 and problem is not None and problem.code == ProblemCode.REFUND_FAILED:
        if refund is not None:
            return seen, Done(RefundFailed(refund)), named_id
        return seen, Fail(UnexpectedAnswer(status, answer.excerpt(), number)), named_id
    return seen, not_definite(answer, problem, number), named_id


#: Refusals of a capture that executed nothing (the key is free again).
CAPTURE_REFUSALS = (
    ProblemCode.CAPTURE_EXCEEDS_CAPTURABLE,
    ProblemCode.PAYMENT_NOT_CAPTURABLE,
    ProblemCode.CURRENCY_MISMATCH,
    ProblemCode.NOT_FOUND,
)
#: Refusals of a void that executed nothing.
VOID_REFUSALS = (ProblemCode.PAYMENT_NOT_VOIDABLE, ProblemCode.NOT_FOUND)


def judge_capture(answer: Answer, number: int, took: float) -> Tuple[Attempt, Step, Optional[str]]:
    """Reads one answer of ``POST /v1/payments/{id}/captures``: 201 with the
    capture ``succeeded`` is :class:`Captured`; 202 (pending at the acquirer)
    is asked again with the same key; 422 ``capture_failed`` (stored) is
    :class:`CaptureFailed`; a refusal that executed nothing is
    :class:`CaptureRefused`; 409 ``authorization_busy`` is asked again (the
    refusal if the budget ends there); 503 ``acquirer_unavailable`` and 409
    ``request_in_progress`` are retried as for every keyed POST."""
    status = answer.status
    if 200 <= status <= 202:
        capture = _capture(answer.json())
        seen = _seen(answer, number, took, None, None)
        if capture is None:
            return seen, Retry(answer.retry_after()), None
        if capture.status == "succeeded" and status != 202:
            return seen, Done(Captured(capture)), capture.id
        if capture.status == "failed" and status != 202:
            return seen, Done(CaptureFailed(capture)), capture.id
        return seen, Retry(answer.retry_after()), capture.id
    problem = answer.problem()
    seen = _seen(answer, number, took, problem, problem.payment_status if problem else None)
    capture = problem.capture if problem else None
    named_id = capture.id if capture else None
    if problem is None:
        return seen, not_definite(answer, problem, number), named_id
    if status == 422 and problem.code == ProblemCode.CAPTURE_FAILED:
        if capture is not None:
            return seen, Done(CaptureFailed(capture)), named_id
        return seen, Fail(UnexpectedAnswer(status, answer.excerpt(), number)), named_id
    if status == 409 and problem.code == ProblemCode.AUTHORIZATION_BUSY:
        return seen, Retry(answer.retry_after(), refused=CaptureRefused(problem)), named_id
    if 400 <= status <= 499 and problem.code in CAPTURE_REFUSALS:
        return seen, Done(CaptureRefused(problem), refusal=True), named_id
    return seen, not_definite(answer, problem, number), named_id


def judge_void(answer: Answer, number: int, took: float) -> Tuple[Attempt, Step, Optional[str]]:
    """Reads one answer of ``POST /v1/payments/{id}/void``: a 200 ends it by the
    payment (``voided``: :class:`VoidVoided`; ``succeeded``, the captures kept
    and the rest released: :class:`VoidReleased`); a 202 (in flight) is asked
    again with the same key; 422 ``void_failed`` (stored) is
    :class:`VoidFailed`; a refusal that executed nothing is
    :class:`VoidRefused`; 409 ``authorization_busy`` is asked again."""
    status = answer.status
    if 200 <= status <= 202:
        payment = _payment(answer.json())
        seen = _seen(answer, number, took, None, payment.status if payment else None)
        if payment is None:
            return seen, Retry(answer.retry_after()), None
        if status == 200 and payment.status == "voided":
            return seen, Done(VoidVoided(payment)), payment.id
        if status == 200 and payment.status == "succeeded":
            return seen, Done(VoidReleased(payment)), payment.id
        return seen, Retry(answer.retry_after()), payment.id
    problem = answer.problem()
    named = problem.payment if problem else None
    payment_status = named.status if named else (problem.payment_status if problem else None)
    seen = _seen(answer, number, took, problem, payment_status)
    named_id = named.id if named else None
    if problem is None:
        return seen, not_definite(answer, problem, number), named_id
    if status == 422 and problem.code == ProblemCode.VOID_FAILED:
        if named is not None:
            return seen, Done(VoidFailed(named, problem.failure_code)), named_id
        return seen, Fail(UnexpectedAnswer(status, answer.excerpt(), number)), named_id
    if status == 409 and problem.code == ProblemCode.AUTHORIZATION_BUSY:
        return seen, Retry(answer.retry_after(), refused=VoidRefused(problem)), named_id
    if 400 <= status <= 499 and problem.code in VOID_REFUSALS:
        return seen, Done(VoidRefused(problem), refusal=True), named_id
    return seen, not_definite(answer, problem, number), named_id


def not_definite(answer: Answer, problem: Optional[Problem], number: int) -> Step:
    """An error answer that is no definite outcome: transient statuses are
    retried, ``idempotency_key_reused`` is :class:`KeyReused`, other 4xx
    problems are :class:`ProblemError`."""
    if is_transient(answer.status):
        return Retry(answer.retry_after())
    if problem is not None and problem.code == ProblemCode.IDEMPOTENCY_KEY_REUSED:
        return Fail(KeyReused(problem, number))
    if problem is not None and 400 <= answer.status <= 499:
        return Fail(ProblemError(problem, number))
    return Fail(UnexpectedAnswer(answer.status, answer.excerpt(), number))


O = TypeVar("O")


class KeyedCall(Generic[O]):
    """The retry loop of one keyed POST, without I/O.

    Every attempt carries the same key and the same body bytes (the transport
    sends ``self.body``, serialised once). Use::

        call = KeyedCall(policy, judge_payment, Uncertain, body, prefer=True)
        while True:
            timeout, headers = call.plan()
            ... send, then decision = call.on_answer(answer, took) or call.on_failure(kind, msg, took)
            if isinstance(decision, Sleep): sleep(decision.seconds); continue
            if isinstance(decision, Done): return decision.value, call.attempts
            raise decision.error
    """

    def __init__(
        self,
        policy: RetryPolicy,
        judge: Judge,
        uncertain: Callable[[Optional[str]], O],
        body: bytes,
        prefer: bool,
        clock: Callable[[], float] = time.monotonic,
        rng: Callable[[float, float], float] = random.uniform,
    ) -> None:
        self.policy = policy
        self.judge = judge
        self.uncertain = uncertain
        self.body = body
        self.prefer = prefer
        self.clock = clock
        self.rng = rng
        self.deadline = clock() + policy.budget
        self.attempts: List[Attempt] = []
        self.named_id: Optional[str] = None
        # An earlier attempt may have executed (sent, no definite answer):
        # from then on a refusal proves nothing; the result is uncertain.
        self.maybe_executed = False

    def end_by(self, seconds: Optional[float]) -> None:
        """Ends the call within ``seconds`` from now (sooner than the budget, if
        so): a call out of time ends :class:`~chargeonce.Uncertain` when no
        definite answer came, like one out of budget."""
        if seconds is not None:
            self.deadline = min(self.deadline, self.clock() + max(seconds, 0.0))

    @property
    def number(self) -> int:
        return len(self.attempts) + 1

    def plan(self) -> Tuple[float, Dict[str, str]]:
        """The next attempt's timeout (seconds) and its extra headers."""
        timeout = max(min(self.policy.attempt_timeout, self.deadline - self.clock()), 0.001)
        headers: Dict[str, str] = {}
        if self.prefer:
            seconds = self.policy.prefer_seconds(timeout)
            if seconds is not None:
                headers["prefer"] = f"wait={seconds}"
        return timeout, headers

    def on_answer(self, answer: Answer, took: float) -> Decision:
        seen, step, named = self.judge(answer, self.number, took)
        if named is not None:
            self.named_id = named
        return self._next(seen, step)

    def on_failure(self, kind: str, message: str, took: float) -> Decision:
        seen = Attempt(number=self.number, took=took, failure=kind, message=message)
        return self._next(seen, Retry(None))

    def _next(self, seen: Attempt, step: Step) -> Decision:
        number = seen.number
        if isinstance(step, Done):
            self.attempts.append(seen)
            if step.refusal and self.maybe_executed:
                return Done(self.uncertain(self.named_id))
            return step
        if isinstance(step, Fail):
            if self.maybe_executed:
                self.attempts.append(seen)
                return Done(self.uncertain(self.named_id))
            step.error.attempts = number
            return step
        # A connect failure sent nothing, and a refusal such as
        # ``authorization_busy`` executed nothing under this key.
        if seen.failure != CONNECT and step.refused is None:
            self.maybe_executed = True
        delay = self.policy.delay(number, step.retry_after, self.rng)
        if number >= self.policy.max_attempts or self.clock() + delay >= self.deadline:
            self.attempts.append(seen)
            if step.refused is not None and not self.maybe_executed:
                return Done(step.refused)
            return Done(self.uncertain(self.named_id))
        self.attempts.append(_with_retry(seen, delay))
        return Sleep(delay)


def _with_retry(seen: Attempt, delay: float) -> Attempt:
    from dataclasses import replace

    return replace(seen, retry_in=delay)


class ReadCall:
    """The retry loop of a GET (safe to repeat): transport failures and
    transient statuses are retried within the budget; a 2xx is done; any
    other answer is a :class:`ProblemError` (or :class:`UnexpectedAnswer`)."""

    def __init__(
        self,
        policy: RetryPolicy,
        clock: Callable[[], float] = time.monotonic,
        rng: Callable[[float, float], float] = random.uniform,
    ) -> None:
        self.policy = policy
        self.clock = clock
        self.rng = rng
        self.deadline = clock() + policy.budget
        self.count = 0
        self.last = ""

    def timeout(self) -> float:
        return max(min(self.policy.attempt_timeout, self.deadline - self.clock()), 0.001)

    def on_answer(self, answer: Answer) -> Decision:
        self.count += 1
        if 200 <= answer.status <= 299:
            return Done(answer)
        if is_transient(answer.status):
            self.last = f"{answer.status}: {answer.excerpt()}"
            return self._again(answer.retry_after(), lambda: _refusal(answer, self.count))
        return Fail(_refusal(answer, self.count))

    def on_failure(self, kind: str, message: str) -> Decision:
        self.count += 1
        self.last = f"{kind}: {message}"
        return self._again(None, lambda: Unavailable(self.last, self.count))

    def _again(self, retry_after: Optional[float], error: Callable[[], ChargeonceError]) -> Decision:
        delay = self.policy.delay(self.count, retry_after, self.rng)
        if self.count >= self.policy.max_attempts or self.clock() + delay >= self.deadline:
            return Fail(error())
        return Sleep(delay)


def _refusal(answer: Answer, attempts: int) -> ChargeonceError:
    problem = answer.problem()
    if problem is not None:
        return ProblemError(problem, attempts)
    return UnexpectedAnswer(answer.status, answer.excerpt(), attempts)


def uncertain_payment(payment_id: Optional[str]) -> Uncertain:
    return Uncertain(payment_id)


def uncertain_refund(refund_id: Optional[str]) -> RefundUncertain:
    return RefundUncertain(refund_id)


def uncertain_cancel(payment_id: Optional[str]) -> CancelUncertain:
    return CancelUncertain(payment_id)


def uncertain_capture(capture_id: Optional[str]) -> CaptureUncertain:
    return CaptureUncertain(capture_id)


def uncertain_void(payment_id: Optional[str]) -> VoidUncertain:
    return VoidUncertain(payment_id)


def _api_key(data: Any) -> Optional[ApiKey]:
    try:
        return ApiKey.from_json(data) if isinstance(data, dict) else None
    except (KeyError, TypeError, ValueError):
        return None


#: Refusals of a key's make or roll that waiting cannot change (409s, which
#: are otherwise retried).
API_KEY_REFUSALS = (ProblemCode.API_KEY_LIMIT_REACHED, ProblemCode.API_KEY_INACTIVE)


def judge_api_key(answer: Answer, number: int, took: float) -> Tuple[Attempt, Step, Optional[str]]:
    """Reads one answer of ``POST /v1/api-keys``, ``.../{id}/roll`` or
    ``.../{id}/revoke``: a 200 or 201 with the key ends it (``replayed`` from
    ``Idempotent-Replayed``); 409 ``api_key_limit_reached`` and
    ``api_key_inactive`` are :class:`ProblemError`; the rest as for every
    keyed POST (transient statuses retried with the same key and body)."""
    status = answer.status
    if status in (200, 201):
        key = _api_key(answer.json())
        seen = _seen(answer, number, took, None, None)
        if key is None:
            # Mangled on the way: ask again (a repeat makes nothing).
            return seen, Retry(answer.retry_after()), None
        return seen, Done(dataclasses.replace(key, replayed=answer.replayed)), key.id
    problem = answer.problem()
    seen = _seen(answer, number, took, problem, None)
    if status == 409 and problem is not None and problem.code in API_KEY_REFUSALS:
        return seen, Fail(ProblemError(problem, number)), None
    return seen, not_definite(answer, problem, number), None


def uncertain_api_key(key_id: Optional[str]) -> None:
    """No definite answer within the budget: the client raises
    :class:`Unavailable` (retry later with the same idempotency key)."""
    return None


def _webhook_endpoint(data: Any) -> Optional[WebhookEndpoint]:
    try:
        return WebhookEndpoint.from_json(data) if isinstance(data, dict) else None
    except (KeyError, TypeError, ValueError):
        return None


def judge_webhook_endpoint(answer: Answer, number: int, took: float) -> Tuple[Attempt, Step, Optional[str]]:
    """Reads one answer of ``POST /v1/webhook-endpoints``, ``.../{id}`` (an
    update) or ``.../{id}/roll-secret``: a 200 or 201 with the endpoint ends it
    (``replayed`` from ``Idempotent-Replayed``); 409
    ``webhook_endpoint_limit_reached`` is a :class:`ProblemError`; the rest as
    for every keyed POST (transient statuses retried with the same key and
    body)."""
    status = answer.status
    if status in (200, 201):
        endpoint = _webhook_endpoint(answer.json())
        seen = _seen(answer, number, took, None, None)
        if endpoint is None:
            # Mangled on the way: ask again (a repeat makes nothing).
            return seen, Retry(answer.retry_after()), None
        return seen, Done(dataclasses.replace(endpoint, replayed=answer.replayed)), endpoint.id
    problem = answer.problem()
    seen = _seen(answer, number, took, problem, None)
    if status == 409 and problem is not None and problem.code == ProblemCode.WEBHOOK_ENDPOINT_LIMIT_REACHED:
        return seen, Fail(ProblemError(problem, number)), None
    return seen, not_definite(answer, problem, number), None


def uncertain_webhook_endpoint(endpoint_id: Optional[str]) -> None:
    """No definite answer within the budget: the client raises
    :class:`Unavailable` (retry later with the same idempotency key)."""
    return None
