"""The verifier against the server's real merchant events: chargeonce signs,
chargeonce.webhooks verifies."""
from __future__ import annotations

import uuid

from chargeonce import Amount, Client, IdempotencyKey, Paid
from chargeonce.webhooks import SignatureError, verify
from harness import SECRET, SHOP, Server, webhook_receiver

WEBHOOK_SECRET = "whsec_pytest_delivery_0123456789"


def test_merchant_events_verify() -> None:
    httpd, received = webhook_receiver()
    server = Server(
        ["--relay-interval", "200ms"],
        webhook_url=f"http://127.0.0.1:{httpd.server_address[1]}/hook",
        webhook_secret=WEBHOOK_SECRET,
    )
    try:
        reference = f"hook-{uuid.uuid4().hex[:8]}"
        with Client(server.url, SHOP, SECRET) as client:
            result = client.pay(IdempotencyKey.for_operation(reference, "pay"), Amount.of("15.00", "RUB"), reference, "tok_ok")
        assert isinstance(result.outcome, Paid)
        headers, body = received.get(timeout=20)
        verify(WEBHOOK_SECRET, headers["chargeonce-signature"], body)
        assert headers["chargeonce-event-type"] == "payment.succeeded"
        for tampered_secret, tampered_body in [("whsec_wrong_secret_0000", body), (WEBHOOK_SECRET, body + b" ")]:
            try:
                verify(tampered_secret, headers["chargeonce-signature"], tampered_body)
            except SignatureError as error:
                assert error.reason == "mismatch"
            else:
                raise AssertionError("a tampered event verified")
    finally:
        server.stop()
        httpd.shutdown()
