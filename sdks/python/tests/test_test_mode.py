"""Test mode: ``livemode`` on the models (absent is live: an answer stored
before test mode existed), then the sync and the async client against a real
server. The shop's live key and a test key (``sk_test_...``, made with
``chargeonce shops keys add --mode test`` in the server's store) pay with the
same idempotency key and the same order reference: two payments, ``livemode``
true and false, and each key's look-up of the other mode's payment is 404
``not_found``. A test key's webhook endpoint is a test one, live mode does
not list it, and the event it receives says ``"livemode": false``."""
from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any, Dict

import pytest

from chargeonce import (
    Amount,
    AsyncClient,
    Capture,
    Client,
    IdempotencyKey,
    Paid,
    Payment,
    ProblemCode,
    ProblemError,
    Refund,
    RetryPolicy,
    WebhookEndpoint,
)
from chargeonce.webhooks import construct_event

from harness import SECRET, SHOP, Server, webhook_receiver

POLICY = RetryPolicy(budget=10.0, attempt_timeout=5.0, base_delay=0.02, max_delay=0.2)
DELIVERY_TIMEOUT = 30.0
RUB = "RUB"

PAYMENT: Dict[str, Any] = {
    "id": "pay_1", "object": "payment", "shop_id": "s", "status": "succeeded",
    "amount": {"value": "15.00", "currency": RUB}, "reference": "order-1", "provider_payment_id": None,
    "decline_code": None, "created_at": "2026-12-06T00:00:00.000Z",
    "amount_refunded": {"value": "0.00", "currency": RUB}, "refund_status": "none",
}
REFUND: Dict[str, Any] = {
    "id": "re_1", "object": "refund", "payment_id": "pay_1", "shop_id": "s", "status": "succeeded",
    "amount": {"value": "15.00", "currency": RUB}, "provider_refund_id": None, "failure_code": None,
    "created_at": "2026-12-06T00:00:01.000Z",
}
CAPTURE: Dict[str, Any] = {
    "id": "cap_1", "object": "capture", "payment_id": "pay_1", "shop_id": "s", "status": "succeeded",
    "amount": {"value": "15.00", "currency": RUB}, "final": True, "provider_capture_id": None,
    "failure_code": None, "created_at": "2026-12-06T00:00:01.000Z",
}
ENDPOINT: Dict[str, Any] = {
    "id": "we_1", "object": "webhook_endpoint", "url": "https://shop.example/hooks", "enabled_events": ["*"],
    "description": None, "enabled": True, "managed_by_operator": False,
    "created_at": "2026-12-06T00:00:00.000Z", "previous_secret_expires_at": None,
}
MODELS = [(Payment, PAYMENT), (Refund, REFUND), (Capture, CAPTURE), (WebhookEndpoint, ENDPOINT)]


@pytest.mark.parametrize("model,body", MODELS, ids=lambda m: getattr(m, "__name__", ""))
def test_livemode_is_read_and_absent_is_live(model: Any, body: Dict[str, Any]) -> None:
    assert model.from_json(body).livemode is True
    assert model.from_json({**body, "livemode": True}).livemode is True
    test = model.from_json({**body, "livemode": False})
    assert test.livemode is False and "livemode=False" in repr(test)


def order(label: str) -> str:
    return f"{label}-{uuid.uuid4().hex[:12]}"


def refusal(error: ProblemError) -> Any:
    return error.status, error.code


def test_the_same_key_and_order_pay_once_in_each_mode() -> None:
    httpd, received = webhook_receiver()
    server = Server(["--relay-interval", "200ms"])
    try:
        test_secret = server.make_key(mode="test")
        assert test_secret.startswith("sk_test_")
        with Client(server.url, SHOP, SECRET, POLICY) as live, Client(server.url, SHOP, test_secret, POLICY) as test:
            # A test key's endpoint is test mode's: live mode does not list it.
            endpoint = test.create_webhook_endpoint(
                f"http://127.0.0.1:{httpd.server_address[1]}/test-hooks", ["payment.succeeded"],
                IdempotencyKey.for_operation(order("test-endpoint"), "make"))
            assert endpoint.livemode is False and endpoint.secret is not None
            assert [e.id for e in test.list_webhook_endpoints()] == [endpoint.id]
            assert endpoint.id not in [e.id for e in live.list_webhook_endpoints()]

            reference = order("test-mode")
            key = IdempotencyKey.for_operation(reference, "pay")
            live_paid = live.pay(key, Amount.of("15.00", RUB), reference, "tok_ok")
            test_paid = test.pay(key, Amount.of("15.00", RUB), reference, "tok_ok")
            assert isinstance(live_paid.outcome, Paid) and isinstance(test_paid.outcome, Paid)
            live_payment, test_payment = live_paid.outcome.payment, test_paid.outcome.payment
            assert live_payment.id != test_payment.id, "two payments"
            assert (live_payment.livemode, test_payment.livemode) == (True, False)
            assert live_payment.reference == test_payment.reference == reference
            assert test_payment.shop_id == SHOP, "the shop's own id in either mode"

            # Each key reads its own mode's payment, and not the other's.
            assert live.payment(live_payment.id).livemode is True
            assert test.payment(test_payment.id).livemode is False
            for client, other in ((live, test_payment.id), (test, live_payment.id)):
                with pytest.raises(ProblemError) as missing:
                    client.payment(other)
                assert refusal(missing.value) == (404, ProblemCode.NOT_FOUND)
            assert [p.id for p in test.payments_for(reference)] == [test_payment.id]
            assert [p.id for p in live.payments_for(reference)] == [live_payment.id]

        # The async client sees the same.
        async def read() -> None:
            async with AsyncClient(server.url, SHOP, test_secret, POLICY) as test:
                assert (await test.payment(test_payment.id)).livemode is False
                with pytest.raises(ProblemError) as missing:
                    await test.payment(live_payment.id)
                assert refusal(missing.value) == (404, ProblemCode.NOT_FOUND)

        asyncio.run(read())

        # The test endpoint receives the test payment's event, which says its mode.
        deadline = time.monotonic() + DELIVERY_TIMEOUT
        while True:
            headers, body = received.get(timeout=max(0.1, deadline - time.monotonic()))
            event = construct_event(endpoint.secret, headers["chargeonce-signature"], body)
            if event["data"]["payment"]["id"] == test_payment.id:
                break
        assert event["type"] == "payment.succeeded" and event["livemode"] is False, json.dumps(event)
    finally:
        server.stop()
        httpd.shutdown()
