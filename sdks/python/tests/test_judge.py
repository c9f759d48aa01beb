"""The retry loop and the answer judgement, without a network."""
import json
from typing import List

import pytest

from chargeonce import (
    Declined, KeyReused, Paid, PaymentNotCancelable, ProblemCode, ProblemError, RefundFailed, RetryPolicy, Uncertain,
)
from chargeonce._judge import Answer, Done, Fail, KeyedCall, Sleep, judge_payment, judge_refund, uncertain_payment, uncertain_refund
from chargeonce._client import payment_body
from chargeonce import Amount

PAYMENT = {"id": "pay_1", "object": "payment", "shop_id": "s", "status": "succeeded",
           "amount": {"value": "15.00", "currency": "RUB"}, "reference": "o", "provider_payment_id": "ch_1",
           "decline_code": None, "created_at": "2026-12-02T00:00:00Z",
           "amount_refunded": {"value": "0.00", "currency": "RUB"}, "refund_status": "none"}


def ok(status: int, payment: dict, **headers: str) -> Answer:
    return Answer(status, {"content-type": "application/json", **headers}, json.dumps(payment).encode())


def problem(status: int, code: str, **extra: object) -> Answer:
    body = {"type": f"urn:chargeonce:problem:{code}", "title": "t", "status": status, "detail": "d", "code": code,
            "request_id": "req-1", **extra}
    return Answer(status, {"content-type": "application/problem+json", "retry-after": "1"}, json.dumps(body).encode())


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def call(policy: RetryPolicy = RetryPolicy(), clock: Clock = None) -> KeyedCall:
    return KeyedCall(policy, judge_payment, uncertain_payment, b"{}", True, clock=clock or Clock(), rng=lambda lo, hi: hi)


def test_a_success_is_paid_at_once() -> None:
    c = call()
    decision = c.on_answer(ok(201, PAYMENT), 0.01)
    assert isinstance(decision, Done) and decision.value == Paid(c.attempts[0] and decision.value.payment)
    assert decision.value.payment.id == "pay_1" and len(c.attempts) == 1


def test_pending_409_429_5xx_and_lost_answers_are_retried_after_retry_after() -> None:
    c = call()
    pending = dict(PAYMENT, status="pending")
    for answer in [ok(202, pending, **{"retry-after": "1"}), problem(409, "request_in_progress"),
                   problem(429, "rate_limited"), problem(503, "acquirer_unavailable")]:
        decision = c.on_answer(answer, 0.01)
        assert isinstance(decision, Sleep) and decision.seconds >= 1
    assert isinstance(c.on_failure("lost", "closed", 0.01), Sleep)
    assert isinstance(c.on_answer(ok(201, PAYMENT), 0.01), Done)
    assert [a.status for a in c.attempts] == [202, 409, 429, 503, None, 201]


def test_a_decline_is_definite() -> None:
    c = call()
    decision = c.on_answer(problem(402, "payment_declined", payment=dict(PAYMENT, status="declined")), 0.01)
    assert isinstance(decision, Done) and isinstance(decision.value, Declined)


def test_key_reused_is_raised_and_never_retried() -> None:
    c = call()
    decision = c.on_answer(problem(422, "idempotency_key_reused"), 0.01)
    assert isinstance(decision, Fail) and isinstance(decision.error, KeyReused)
    assert decision.error.code == ProblemCode.IDEMPOTENCY_KEY_REUSED and decision.error.status == 422
    assert decision.error.request_id == "req-1" and decision.error.attempts == 1


def test_unknown_codes_stay_strings() -> None:
    c = call()
    decision = c.on_answer(problem(400, "brand_new_code"), 0.01)
    assert isinstance(decision, Fail) and isinstance(decision.error, ProblemError)
    assert decision.error.code == "brand_new_code" and not isinstance(decision.error.code, ProblemCode)


def test_a_refusal_after_a_maybe_executed_attempt_is_uncertain() -> None:
    c = call()
    assert isinstance(c.on_failure("timeout", "no answer", 20), Sleep)
    decision = c.on_answer(problem(400, "invalid_request"), 0.01)
    assert isinstance(decision, Done) and decision.value == Uncertain(None)


def test_a_refusal_after_connect_failures_is_an_error() -> None:
    c = call()
    assert isinstance(c.on_failure("connect", "refused", 0.01), Sleep)
    assert isinstance(c.on_answer(problem(400, "invalid_request"), 0.01), Fail)


def test_the_budget_ends_in_uncertain_with_the_named_payment() -> None:
    clock = Clock()
    c = call(RetryPolicy(budget=3, base_delay=0.5, max_delay=0.5), clock)
    pending = dict(PAYMENT, status="pending")
    decisions: List[object] = []
    while True:
        d = c.on_answer(ok(202, pending, **{"retry-after": "1"}), 0.01)
        decisions.append(d)
        if not isinstance(d, Sleep):
            break
        clock.now += d.seconds
    assert decisions[-1] == Done(Uncertain("pay_1"))
    assert len(c.attempts) == 3


def test_a_deadline_ends_the_call_uncertain_sooner_than_the_budget() -> None:
    clock = Clock()
    c = call(RetryPolicy(budget=60, base_delay=0.5, max_delay=0.5), clock)
    c.end_by(1.2)
    assert c.plan()[0] <= 1.2, "an attempt never outlives the deadline"
    decisions: List[object] = []
    while True:
        d = c.on_failure("timeout", "x", 0.01)
        decisions.append(d)
        if not isinstance(d, Sleep):
            break
        clock.now += d.seconds
    # Sent, no answer: the charge may have happened. Uncertain, never an error.
    assert decisions[-1] == Done(Uncertain(None))
    assert clock.now <= 1.2
    assert len(c.attempts) == 3
    c = call(RetryPolicy(budget=2), Clock())
    c.end_by(None)
    assert c.deadline == 2, "no deadline: the budget"


def test_max_attempts() -> None:
    c = call(RetryPolicy(max_attempts=2))
    assert isinstance(c.on_failure("lost", "x", 0), Sleep)
    assert c.on_failure("lost", "x", 0) == Done(Uncertain(None))


def test_prefer_wait_is_sent_within_the_attempt() -> None:
    c = call(RetryPolicy(prefer_wait=10, attempt_timeout=20))
    timeout, headers = c.plan()
    assert timeout == 20 and headers == {"prefer": "wait=10"}
    assert KeyedCall(RetryPolicy(), judge_refund, uncertain_refund, b"{}", False).plan()[1] == {}


def test_a_failed_refund_is_definite() -> None:
    refund = {"id": "re_1", "object": "refund", "payment_id": "pay_1", "shop_id": "s", "status": "failed",
              "amount": {"value": "5.00", "currency": "RUB"}, "provider_refund_id": None,
              "failure_code": "x", "created_at": "2026-12-02T00:00:00Z"}
    c = KeyedCall(RetryPolicy(), judge_refund, uncertain_refund, b"{}", False)
    d = c.on_answer(problem(422, "refund_failed", refund=refund), 0)
    assert isinstance(d, Done) and isinstance(d.value, RefundFailed)


def test_the_body_is_serialised_once_with_decimal_strings() -> None:
    body = payment_body(Amount.of("15.00", "RUB"), "o", "tok_ok")
    assert body == b'{"amount":{"value":"15.00","currency":"RUB"},"reference":"o","payment_method":{"token":"tok_ok"}}'
    with pytest.raises(TypeError):
        Amount.of(15.0, "RUB")  # type: ignore[arg-type]


def test_pages_walk_in_the_direction_they_started() -> None:
    from chargeonce._models import Page

    class Item:
        def __init__(self, id: str) -> None:
            self.id = id

    newest_first = Page(object="list", data=[Item("p9"), Item("p8")], has_more=True)
    assert newest_first.next_params({"limit": 2}) == {"limit": 2, "starting_after": "p8", "ending_before": None}
    assert newest_first.next_params({"ending_before": "p7"}) == {"ending_before": "p9", "starting_after": None}
    done = Page(object="list", data=[Item("p1")], has_more=False)
    assert done.next_params({"limit": 2}) is None


def test_a_canceled_payment_is_its_own_outcome_never_paid() -> None:
    from chargeonce import Canceled

    canceled = {**PAYMENT, "status": "canceled", "provider_payment_id": None}
    seen, step, named = judge_payment(problem(409, "payment_canceled", payment=canceled), 1, 0.0)
    assert isinstance(step, Done) and isinstance(step.value, Canceled)
    assert step.value.payment.status == "canceled" and named == "pay_1"


def test_a_cancel_ends_by_the_payment_it_answers_with() -> None:
    from chargeonce import CancelCanceled, CancelCharged, CancelDeclined, CancelRefunded
    from chargeonce._judge import judge_cancel

    refunded = {**PAYMENT, "amount_refunded": {"value": "15.00", "currency": "RUB"}, "refund_status": "refunded"}
    partly = {**PAYMENT, "amount_refunded": {"value": "5.00", "currency": "RUB"}}
    cases = [
        ({**PAYMENT, "status": "canceled"}, CancelCanceled),
        ({**PAYMENT, "status": "declined"}, CancelDeclined),
        (refunded, CancelRefunded),
        (partly, CancelCharged),
    ]
    for payment, expected in cases:
        _, step, _ = judge_cancel(ok(200, payment), 1, 0.0)
        assert isinstance(step, Done) and isinstance(step.value, expected), (payment, step)
    # 202: not ended (the charge is looked up after the settle window); asked again.
    _, step, named = judge_cancel(ok(202, {**PAYMENT, "status": "pending"}, **{"retry-after": "2"}), 1, 0.0)
    assert not isinstance(step, Done) and named == "pay_1"
    # A payment final before the cancel: a stored refusal, never retried.
    _, step, _ = judge_cancel(problem(409, "payment_not_cancelable", payment=PAYMENT), 1, 0.0)
    assert isinstance(step, Fail) and isinstance(step.error, PaymentNotCancelable)
    assert isinstance(step.error, ProblemError) and step.error.code == ProblemCode.PAYMENT_NOT_CANCELABLE
    assert step.error.payment is not None and step.error.payment.status == "succeeded"
    # 409 in progress is retried as for every keyed POST.
    _, step, _ = judge_cancel(problem(409, "request_in_progress"), 1, 0.0)
    assert not isinstance(step, (Done, Fail))


def test_a_canceled_payment_is_parsed() -> None:
    from chargeonce import Canceled, IdempotencyKey, PaymentStatus, PayResult, Payment

    payment = Payment.from_json({**PAYMENT, "status": "canceled", "provider_payment_id": None})
    assert PaymentStatus(payment.status) is PaymentStatus.CANCELED
    assert payment.provider_payment_id is None and payment.refund_status == "none"
    result = PayResult(Canceled(payment), IdempotencyKey("o-pay"), [])
    assert result.payment is payment


def test_a_cancel_not_ended_by_the_budget_is_uncertain_with_its_payment() -> None:
    from chargeonce import CancelResult, CancelUncertain, IdempotencyKey
    from chargeonce._judge import judge_cancel, uncertain_cancel

    clock = Clock()
    c = KeyedCall(RetryPolicy(budget=5.0), judge_cancel, uncertain_cancel, b"{}", False, clock=clock, rng=lambda lo, hi: 0.0)
    assert c.plan()[1] == {}  # no Prefer on a cancel
    pending = {**PAYMENT, "status": "pending", "provider_payment_id": None}
    decision = c.on_answer(ok(202, pending, **{"retry-after": "2"}), 0.01)
    assert isinstance(decision, Sleep) and decision.seconds == 2.0  # never sooner than Retry-After
    clock.now += 2.0
    decision = c.on_answer(ok(202, pending, **{"retry-after": "2"}), 0.01)
    assert isinstance(decision, Sleep)
    clock.now += 2.0
    # The next wait would end past the budget: uncertain, naming the payment.
    decision = c.on_answer(ok(202, pending, **{"retry-after": "2"}), 0.01)
    assert isinstance(decision, Done) and decision.value == CancelUncertain("pay_1")
    result = CancelResult(decision.value, IdempotencyKey("o-cancel"), c.attempts)
    assert result.payment is None and len(result.attempts) == 3
    assert [a.status for a in result.attempts] == [202, 202, 202]


def test_a_refund_still_pending_is_not_the_end_of_a_cancel() -> None:
    from chargeonce._judge import judge_cancel

    refunding = {**PAYMENT, "refund_status": "none"}
    _, step, _ = judge_cancel(ok(202, refunding, **{"retry-after": "1"}), 1, 0.0)
    assert not isinstance(step, (Done, Fail))
