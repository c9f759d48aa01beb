"""The lifecycle's models: a payment's authorization members (and what an answer
stored before they existed means), captures, and the problems that name them."""
from __future__ import annotations

from typing import Any, Dict

from chargeonce import Amount, Capture, CaptureMethod, CaptureStatus, Payment, PaymentStatus, Problem, ProblemCode

RUB = "RUB"


def payment(status: str, **extra: Any) -> Dict[str, Any]:
    return {"id": "pay_1", "object": "payment", "shop_id": "s", "status": status,
            "amount": {"value": "1500.00", "currency": RUB}, "reference": "order-123", "provider_payment_id": "ch_1",
            "decline_code": None, "created_at": "2026-12-05T00:00:00.000Z",
            "amount_refunded": {"value": "0.00", "currency": RUB}, "refund_status": "none", "metadata": {}, **extra}


CAPTURE = {"id": "cap_1", "object": "capture", "payment_id": "pay_1", "shop_id": "s", "status": "succeeded",
           "amount": {"value": "1000.00", "currency": RUB}, "final": False, "provider_capture_id": "cp_1",
           "failure_code": None, "created_at": "2026-12-05T00:00:01.000Z"}


def test_an_authorization_is_read_with_its_hold() -> None:
    p = Payment.from_json(payment(
        "partially_captured", capture_method="manual",
        amount_capturable={"value": "500.00", "currency": RUB}, amount_captured={"value": "1000.00", "currency": RUB},
        authorization_expires_at="2026-12-12T00:00:00.000Z",
    ))
    assert PaymentStatus(p.status) is PaymentStatus.PARTIALLY_CAPTURED
    assert CaptureMethod(p.capture_method) is CaptureMethod.MANUAL
    assert p.amount_capturable == Amount("500.00", RUB) and p.amount_captured == Amount("1000.00", RUB)
    assert p.authorization_expires_at == "2026-12-12T00:00:00.000Z"
    for status in ("authorized", "voided", "expired"):
        assert PaymentStatus(Payment.from_json(payment(status)).status).value == status


def test_an_answer_stored_before_authorizations_is_a_payment_charged_at_once() -> None:
    succeeded = Payment.from_json(payment("succeeded"))
    assert succeeded.capture_method == "automatic" and succeeded.authorization_expires_at is None
    assert succeeded.amount_capturable.decimal == 0
    # Charged at once and succeeded: its amount was taken.
    assert succeeded.amount_captured == Amount("1500.00", RUB)
    declined = Payment.from_json(payment("declined"))
    assert declined.amount_captured.decimal == 0 and declined.amount_captured.currency == RUB
    # Null members (a newer server's "none") read as absent.
    nulls = Payment.from_json(payment("pending", capture_method=None, amount_capturable=None, amount_captured=None))
    assert nulls.capture_method == "automatic" and nulls.amount_captured.decimal == 0


def test_a_capture_is_read() -> None:
    capture = Capture.from_json(CAPTURE)
    assert (capture.id, capture.payment_id, capture.final, capture.provider_capture_id) == ("cap_1", "pay_1", False, "cp_1")
    assert CaptureStatus(capture.status) is CaptureStatus.SUCCEEDED and capture.amount == Amount("1000.00", RUB)
    assert capture.raw == CAPTURE


def test_problems_name_the_capture_and_the_hold() -> None:
    failed = Problem.from_json({"type": "t", "title": "t", "status": 422, "detail": "d", "code": "capture_failed",
                                "capture": {**CAPTURE, "status": "failed", "failure_code": "do_not_honor"},
                                "failure_code": "do_not_honor"}, 422)
    assert failed is not None and failed.code is ProblemCode.CAPTURE_FAILED
    assert failed.capture is not None and failed.capture.status == "failed" and failed.failure_code == "do_not_honor"
    exceeds = Problem.from_json({"code": "capture_exceeds_capturable", "status": 422,
                                 "amount_capturable": {"value": "500.00", "currency": RUB}}, 422)
    assert exceeds is not None and exceeds.amount_capturable == Amount("500.00", RUB) and exceeds.capture is None
    busy = Problem.from_json({"code": "payment_not_capturable", "payment_status": "voided"}, 409)
    assert busy is not None and busy.payment_status == "voided" and busy.status == 409
