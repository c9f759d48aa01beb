"""A webhook secret rolled with an overlap: while it lasts, every delivery
carries a signature made with each secret, and chargeonce.webhooks verifies
it with either (the receiver can switch secrets without refusing an event)."""
from __future__ import annotations

import subprocess
import uuid

from chargeonce import Amount, Client, IdempotencyKey, Paid
from chargeonce.webhooks import SignatureError, verify
from harness import SECRET, SHOP, Server, binary, webhook_receiver

OLD_SECRET = "whsec_pytest_roll_old_0123456789"
NEW_SECRET = "whsec_pytest_roll_new_0123456789"
NEWEST_SECRET = "whsec_pytest_roll_newest_01234567"


def _roll(server: Server, secret: str, expire_old_in: str) -> None:
    subprocess.run(
        [binary(), "shops", "roll-webhook-secret", "--shop", SHOP, "--secret", secret,
         "--expire-old-in", expire_old_in, "--database-url", f"sqlite://{server.dir}/db.sqlite"],
        check=True, capture_output=True, timeout=60,
    )


def _pay(server: Server) -> None:
    reference = f"roll-{uuid.uuid4().hex[:8]}"
    with Client(server.url, SHOP, SECRET) as client:
        result = client.pay(IdempotencyKey.for_operation(reference, "pay"), Amount.of("15.00", "RUB"), reference, "tok_ok")
    assert isinstance(result.outcome, Paid)


def test_during_the_overlap_either_secret_verifies() -> None:
    httpd, received = webhook_receiver()
    server = Server(
        ["--relay-interval", "200ms"],
        webhook_url=f"http://127.0.0.1:{httpd.server_address[1]}/hook",
        webhook_secret=OLD_SECRET,
    )
    try:
        _roll(server, NEW_SECRET, "1h")
        _pay(server)
        headers, body = received.get(timeout=20)
        signature = headers["chargeonce-signature"]
        assert signature.count("v1=") == 2, signature
        verify(OLD_SECRET, signature, body)
        verify(NEW_SECRET, signature, body)

        # A roll with no overlap: the secret it replaced no longer verifies.
        _roll(server, NEWEST_SECRET, "0s")
        _pay(server)
        headers, body = received.get(timeout=20)
        signature = headers["chargeonce-signature"]
        assert signature.count("v1=") == 1, signature
        verify(NEWEST_SECRET, signature, body)
        try:
            verify(NEW_SECRET, signature, body)
        except SignatureError as error:
            assert error.reason == "mismatch"
        else:
            raise AssertionError("the old secret verified after its overlap")
    finally:
        server.stop()
        httpd.shutdown()
