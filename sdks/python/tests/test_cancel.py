"""Cancel around pay_order, against a fake transport: a canceled payment frees its
order, so pay_order's look-up never takes it for the order's payment."""
from __future__ import annotations

import json
from typing import Any, Dict, List

import httpx
import pytest

from chargeonce import (
    Amount,
    AsyncClient,
    CancelRefunded,
    Canceled,
    Client,
    IdempotencyKey,
    Paid,
    PaymentNotCancelable,
    RetryPolicy,
)

BASE = "http://chargeonce.test"
AMOUNT = Amount.of("15.00", "RUB")


def payment(id: str, status: str, **extra: Any) -> Dict[str, Any]:
    return {"id": id, "object": "payment", "shop_id": "s", "status": status,
            "amount": {"value": "15.00", "currency": "RUB"}, "reference": "o", "provider_payment_id": None,
            "decline_code": None, "created_at": "2026-12-02T00:00:00Z",
            "amount_refunded": {"value": "0.00", "currency": "RUB"}, "refund_status": "none", **extra}


def problem(status: int, code: str, **extra: Any) -> httpx.Response:
    body = {"type": f"urn:chargeonce:problem:{code}", "title": "t", "status": status, "detail": "d",
            "code": code, "request_id": "req-1", **extra}
    return httpx.Response(status, json=body, headers={"content-type": "application/problem+json"})


class Fake:
    """Answers by (method, path) from a list per route; records what was sent."""

    def __init__(self, routes: Dict[str, List[httpx.Response]]) -> None:
        self.routes = routes
        self.sent: List[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        return self.routes[f"{request.method} {request.url.path}"].pop(0)


def lookup(*payments: Dict[str, Any]) -> httpx.Response:
    return httpx.Response(200, json={"object": "list", "data": list(payments), "has_more": False})


def fake_for_pay_order(pay_answer: httpx.Response) -> Fake:
    return Fake({
        "GET /v1/payments": [lookup(payment("pay_old", "canceled"))],
        "POST /v1/payments": [pay_answer],
    })


@pytest.mark.parametrize("pay_answer, expected", [
    # A new key: the freed order is paid anew.
    (httpx.Response(201, json=payment("pay_new", "succeeded", provider_payment_id="ch_1")), Paid),
    # The canceled payment's own key: its stored 409.
    (problem(409, "payment_canceled", payment=payment("pay_old", "canceled")), Canceled),
])
def test_pay_order_never_takes_a_canceled_payment_for_the_orders(pay_answer: httpx.Response, expected: type) -> None:
    fake = fake_for_pay_order(pay_answer)
    with Client(BASE, "s", "sk", RetryPolicy(), http=httpx.Client(transport=httpx.MockTransport(fake))) as client:
        result = client.pay_order(IdempotencyKey("o-pay"), AMOUNT, "o", "tok_ok")
    assert isinstance(result.outcome, expected) and not result.found_before_paying
    assert [r.method for r in fake.sent] == ["GET", "POST"]


@pytest.mark.parametrize("pay_answer, expected", [
    (httpx.Response(201, json=payment("pay_new", "succeeded", provider_payment_id="ch_1")), Paid),
    (problem(409, "payment_canceled", payment=payment("pay_old", "canceled")), Canceled),
])
async def test_pay_order_never_takes_a_canceled_payment_for_the_orders_async(
    pay_answer: httpx.Response, expected: type
) -> None:
    fake = fake_for_pay_order(pay_answer)
    http = httpx.AsyncClient(transport=httpx.MockTransport(fake))
    async with AsyncClient(BASE, "s", "sk", RetryPolicy(), http=http) as client:
        result = await client.pay_order(IdempotencyKey("o-pay"), AMOUNT, "o", "tok_ok")
    assert isinstance(result.outcome, expected) and not result.found_before_paying


def test_cancel_retries_202_with_the_same_key_and_body_until_it_ends() -> None:
    pending = payment("pay_1", "pending")
    refunded = payment("pay_1", "succeeded", provider_payment_id="ch_1", refund_status="refunded",
                       amount_refunded={"value": "15.00", "currency": "RUB"})
    fake = Fake({"POST /v1/payments/pay_1/cancel": [
        httpx.Response(202, json=pending, headers={"retry-after": "0"}),
        problem(409, "request_in_progress"),
        httpx.Response(200, json=refunded),
    ]})
    policy = RetryPolicy(base_delay=0.001, max_delay=0.001)
    with Client(BASE, "s", "sk", policy, http=httpx.Client(transport=httpx.MockTransport(fake))) as client:
        result = client.cancel("pay_1", IdempotencyKey.for_operation("o", "cancel"))
    assert isinstance(result.outcome, CancelRefunded) and result.payment is not None
    assert [a.status for a in result.attempts] == [202, 409, 200]
    assert {r.headers["idempotency-key"] for r in fake.sent} == {"o-cancel"}
    assert {r.content for r in fake.sent} == {b"{}"}
    assert all("prefer" not in r.headers for r in fake.sent)


def test_a_payment_final_before_the_cancel_is_not_cancelable() -> None:
    fake = Fake({"POST /v1/payments/pay_1/cancel": [
        problem(409, "payment_not_cancelable", payment=payment("pay_1", "succeeded", provider_payment_id="ch_1")),
    ]})
    with Client(BASE, "s", "sk", RetryPolicy(), http=httpx.Client(transport=httpx.MockTransport(fake))) as client:
        with pytest.raises(PaymentNotCancelable) as raised:
            client.cancel("pay_1", "o-cancel")
    assert raised.value.status == 409 and raised.value.attempts == 1
    assert raised.value.payment is not None and raised.value.payment.status == "succeeded"
