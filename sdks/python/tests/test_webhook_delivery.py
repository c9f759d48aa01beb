"""The verifier against the server's real merchant events: chargeonce signs,
chargeonce.webhooks verifies."""
from __future__ import annotations

import http.server
import queue
import threading
import uuid

from chargeonce import Amount, Client, IdempotencyKey, Paid
from chargeonce.webhooks import SignatureError, verify
from harness import SECRET, SHOP, Server

WEBHOOK_SECRET = "whsec_pytest_delivery_0123456789"


def test_merchant_events_verify() -> None:
    received: "queue.Queue[tuple[dict, bytes]]" = queue.Queue()

    class Receiver(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            received.put(({k.lower(): v for k, v in self.headers.items()}, body))
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
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
