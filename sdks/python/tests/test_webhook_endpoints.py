"""The shop's webhook endpoints (``/v1/webhook-endpoints``): the bodies and how
a make's answers are judged (a fake transport); then against a real server:
the sync and the async client make an endpoint (its secret once; a repeat
under the same key is the same endpoint without it), list, get, update, roll
its secret and delete it; two endpoints with different ``enabled_events``
each receive exactly the event types they asked for, signed with their own
secret; and a secret roll with an overlap puts two signatures on a delivery,
each verifiable with ``chargeonce.webhooks.verify``."""
from __future__ import annotations

import asyncio
import json
import queue
import time
import uuid
from typing import Any, Callable, Dict, Iterator, List, Set, Tuple

import httpx
import pytest

from chargeonce import (
    Amount,
    AsyncClient,
    Client,
    Declined,
    IdempotencyKey,
    KeyReused,
    Paid,
    ProblemCode,
    ProblemError,
    Refunded,
    RetryPolicy,
    WebhookEndpoint,
    roll_webhook_endpoint_secret_body,
    update_webhook_endpoint_body,
    webhook_endpoint_body,
)
from chargeonce.webhooks import SignatureError, verify

from harness import SECRET, SHOP, Server, webhook_receiver

BASE = "http://chargeonce.test"
POLICY = RetryPolicy(budget=10.0, attempt_timeout=5.0, base_delay=0.02, max_delay=0.2)
#: How long a delivery may take to arrive (the relay runs every 200 ms here).
DELIVERY_TIMEOUT = 30.0



def endpoint_json(**extra: Any) -> Dict[str, Any]:
    return {"id": "we_01a2297968c07d11b0f4c7e8e0d6a3b1", "object": "webhook_endpoint",
            "url": "https://shop.example/hooks", "enabled_events": ["payment.succeeded"],
            "description": None, "enabled": True, "managed_by_operator": False,
            "created_at": "2026-12-06T10:00:00.000Z", "previous_secret_expires_at": None, **extra}


def fake_client(answers: List[httpx.Response], seen: List[httpx.Request]) -> Client:
    def fake(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return answers.pop(0)

    return Client(BASE, "s", "sk", POLICY, http=httpx.Client(transport=httpx.MockTransport(fake)))


def problem(status: int, code: str) -> httpx.Response:
    return httpx.Response(status, json={"status": status, "code": code, "detail": "x"},
                          headers={"content-type": "application/problem+json"})


def test_the_model_reads_an_endpoint_and_hides_its_secret() -> None:
    made = WebhookEndpoint.from_json(endpoint_json(secret="whsec_4f3a9c0e5b7d"))
    assert (made.enabled_events, made.secret, made.replayed) == (["payment.succeeded"], "whsec_4f3a9c0e5b7d", False)
    assert "9c0e5b7d" not in repr(made)
    assert WebhookEndpoint.from_json(endpoint_json()).secret is None
    with pytest.raises(KeyError):
        WebhookEndpoint.from_json({k: v for k, v in endpoint_json().items() if k != "enabled"})


def test_the_bodies() -> None:
    assert json.loads(webhook_endpoint_body("https://x.example/h", ["*"])) == {
        "url": "https://x.example/h", "enabled_events": ["*"]}
    assert json.loads(webhook_endpoint_body("https://x.example/h", ("payment.succeeded",), "orders")) == {
        "url": "https://x.example/h", "enabled_events": ["payment.succeeded"], "description": "orders"}
    assert update_webhook_endpoint_body(enabled=False) == b'{"enabled":false}'
    assert json.loads(update_webhook_endpoint_body(["*"], True, "")) == {
        "enabled_events": ["*"], "enabled": True, "description": ""}
    assert roll_webhook_endpoint_secret_body() == b"{}"
    assert roll_webhook_endpoint_secret_body(0) == b'{"expire_old_in_seconds":0}'


def test_a_make_is_retried_with_the_same_key_and_bytes_and_the_limit_is_not() -> None:
    seen: List[httpx.Request] = []
    answers = [
        problem(503, "store_unavailable"),
        httpx.Response(201, json=endpoint_json(), headers={"idempotent-replayed": "true"}),
    ]
    with fake_client(answers, seen) as client:
        made = client.create_webhook_endpoint("https://shop.example/hooks", ["payment.succeeded"], "make-1")
    assert made.replayed and made.secret is None
    assert len(seen) == 2 and seen[0].content == seen[1].content
    assert {r.headers["idempotency-key"] for r in seen} == {"make-1"}
    seen.clear()
    with fake_client([problem(409, "webhook_endpoint_limit_reached")], seen) as client:
        with pytest.raises(ProblemError) as refused:
            client.create_webhook_endpoint("https://shop.example/hooks", ["*"], "make-2")
    assert refused.value.code == ProblemCode.WEBHOOK_ENDPOINT_LIMIT_REACHED and len(seen) == 1


def order(label: str) -> str:
    return f"{label}-{uuid.uuid4().hex[:12]}"


def refusal(error: ProblemError) -> Any:
    return error.status, error.code


@pytest.fixture(scope="module")
def endpoint_server() -> Iterator[Server]:
    """A server of its own: the endpoints made here get no other test's events."""
    server = Server()
    yield server
    server.stop()


def check_endpoints(client: Any, call: Callable[..., Any]) -> None:
    """The scenario, for either client (``call`` runs a method of it)."""
    url = "http://127.0.0.1:9/orders"
    make = IdempotencyKey.for_operation(order("orders-ep"), "make")
    events = ["refund.succeeded", "payment.succeeded"]
    made: WebhookEndpoint = call(client.create_webhook_endpoint, url, events, make, description="orders")
    assert made.id.startswith("we_") and made.url == url and made.description == "orders"
    assert made.enabled_events == ["payment.succeeded", "refund.succeeded"], "sorted"
    assert made.enabled and not made.managed_by_operator and not made.replayed
    assert made.secret is not None and made.secret.startswith("whsec_")
    assert made.secret not in repr(made)

    # The same make again: the same endpoint, no secret, nothing made.
    again: WebhookEndpoint = call(client.create_webhook_endpoint, url, events, make, description="orders")
    assert (again.id, again.secret, again.replayed) == (made.id, None, True)
    with pytest.raises(KeyReused):
        call(client.create_webhook_endpoint, url, ["*"], make)

    listed: List[WebhookEndpoint] = call(client.list_webhook_endpoints)
    assert [e.id for e in listed].count(made.id) == 1 and all(e.secret is None for e in listed)
    read: WebhookEndpoint = call(client.webhook_endpoint, made.id)
    assert (read.id, read.secret, read.created_at) == (made.id, None, made.created_at)

    paused: WebhookEndpoint = call(client.update_webhook_endpoint, made.id,
                                   IdempotencyKey.for_operation(made.id, "pause"), enabled=False)
    assert not paused.enabled and paused.enabled_events == made.enabled_events and paused.description == "orders"
    changed: WebhookEndpoint = call(client.update_webhook_endpoint, made.id,
                                    IdempotencyKey.for_operation(made.id, "change"),
                                    enabled_events=["payment.declined"], enabled=True, description="")
    assert changed.enabled and changed.enabled_events == ["payment.declined"] and changed.description is None
    with pytest.raises(ProblemError) as unknown:
        call(client.update_webhook_endpoint, made.id, IdempotencyKey.for_operation(made.id, "bad"),
             enabled_events=["payment.exploded"])
    assert refusal(unknown.value) == (422, ProblemCode.INVALID_REQUEST)

    roll = IdempotencyKey.for_operation(made.id, "roll-1")
    rolled: WebhookEndpoint = call(client.roll_webhook_endpoint_secret, made.id, roll, expire_old_in_seconds=3600)
    assert rolled.id == made.id and rolled.secret and rolled.secret != made.secret and not rolled.replayed
    assert rolled.previous_secret_expires_at is not None
    replayed: WebhookEndpoint = call(client.roll_webhook_endpoint_secret, made.id, roll, expire_old_in_seconds=3600)
    assert (replayed.id, replayed.secret, replayed.replayed) == (made.id, None, True)

    deleted: WebhookEndpoint = call(client.delete_webhook_endpoint, made.id)
    assert deleted.id == made.id and deleted.secret is None
    for gone in (client.delete_webhook_endpoint, client.webhook_endpoint):
        with pytest.raises(ProblemError) as missing:
            call(gone, made.id)
        assert refusal(missing.value) == (404, ProblemCode.NOT_FOUND)
    assert made.id not in [e.id for e in call(client.list_webhook_endpoints)]


def test_endpoints_are_made_changed_rolled_and_deleted(endpoint_server: Server) -> None:
    with Client(endpoint_server.url, SHOP, SECRET, POLICY) as client:
        check_endpoints(client, lambda fn, *args, **kw: fn(*args, **kw))


def test_the_async_client_manages_endpoints(endpoint_server: Server) -> None:
    async def run() -> None:
        async with AsyncClient(endpoint_server.url, SHOP, SECRET, POLICY) as client:
            loop = asyncio.get_running_loop()

            def call(fn: Any, *args: Any, **kw: Any) -> Any:
                return asyncio.run_coroutine_threadsafe(fn(*args, **kw), loop).result(30)

            await asyncio.to_thread(check_endpoints, client, call)

    asyncio.run(run())


# -- Deliveries --------------------------------------------------------------


def events_of(server: Server, payment_ids: Set[str]) -> List[Dict[str, Any]]:
    """The shop's events about these payments (``GET /v1/events``, raw: the SDK
    has no events API)."""
    answer = httpx.get(f"{server.url}/v1/events", params={"limit": "100"}, auth=(SHOP, SECRET), timeout=10)
    answer.raise_for_status()
    return [e for e in answer.json()["data"] if e["payment_id"] in payment_ids]


def wait_delivered(server: Server, payment_ids: Set[str], count: int) -> List[Dict[str, Any]]:
    """Polls until ``count`` events of these payments exist and every delivery
    of each is ``delivered``; returns them."""
    deadline = time.monotonic() + DELIVERY_TIMEOUT
    while True:
        events = events_of(server, payment_ids)
        done = len(events) == count and all(
            e["deliveries"] and all(d["state"] == "delivered" for d in e["deliveries"]) for e in events
        )
        if done:
            return events
        if time.monotonic() > deadline:
            raise AssertionError(f"not all delivered in {DELIVERY_TIMEOUT}s: {json.dumps(events)[:3000]}")
        time.sleep(0.1)


def drain(received: Any) -> List[Tuple[Dict[str, str], bytes]]:
    """Everything a receiver got so far."""
    got = []
    while True:
        try:
            got.append(received.get_nowait())
        except queue.Empty:
            return got


def rejects(secret: str, signature: str, body: bytes) -> bool:
    try:
        verify(secret, signature, body)
    except SignatureError:
        return True
    return False


def test_two_endpoints_each_receive_exactly_the_types_they_asked_for() -> None:
    orders_httpd, orders_received = webhook_receiver()
    declines_httpd, declines_received = webhook_receiver()
    server = Server(["--relay-interval", "200ms"])
    try:
        with Client(server.url, SHOP, SECRET, POLICY) as client:
            orders = client.create_webhook_endpoint(
                f"http://127.0.0.1:{orders_httpd.server_address[1]}/orders",
                ["payment.succeeded", "refund.succeeded"], IdempotencyKey.for_operation(order("orders"), "make"))
            declines = client.create_webhook_endpoint(
                f"http://127.0.0.1:{declines_httpd.server_address[1]}/declines",
                ["payment.declined"], IdempotencyKey.for_operation(order("declines"), "make"))
            assert orders.secret and declines.secret

            paid_ref, declined_ref = order("paid"), order("declined")
            paid = client.pay(IdempotencyKey.for_operation(paid_ref, "pay"), Amount.of("15.00", "RUB"), paid_ref, "tok_ok")
            assert isinstance(paid.outcome, Paid)
            declined = client.pay(IdempotencyKey.for_operation(declined_ref, "pay"), Amount.of("16.00", "RUB"),
                                  declined_ref, "tok_declined")
            assert isinstance(declined.outcome, Declined)
            refund = client.refund(paid.outcome.payment.id, IdempotencyKey.for_operation(paid_ref, "refund-1"))
            assert isinstance(refund.outcome, Refunded)

        payment_ids = {paid.outcome.payment.id, declined.outcome.payment.id}
        events = wait_delivered(server, payment_ids, 3)
        by_type = {e["type"]: e for e in events}
        assert set(by_type) == {"payment.succeeded", "payment.declined", "refund.succeeded"}
        # Each event was written with a delivery to exactly the endpoint that wants it.
        assert [d["endpoint_id"] for d in by_type["payment.succeeded"]["deliveries"]] == [orders.id]
        assert [d["endpoint_id"] for d in by_type["refund.succeeded"]["deliveries"]] == [orders.id]
        assert [d["endpoint_id"] for d in by_type["payment.declined"]["deliveries"]] == [declines.id]

        # And each receiver got exactly those (at least once: dedupe by event id),
        # signed with its own endpoint's secret only.
        for received, secret, other, wanted in (
            (orders_received, orders.secret, declines.secret, {"payment.succeeded", "refund.succeeded"}),
            (declines_received, declines.secret, orders.secret, {"payment.declined"}),
        ):
            got = drain(received)
            assert got, "nothing received"
            ids: Dict[str, str] = {}
            for headers, body in got:
                verify(secret, headers["chargeonce-signature"], body)
                assert rejects(other, headers["chargeonce-signature"], body)
                event = json.loads(body)
                assert headers["chargeonce-event-type"] == event["type"]
                ids[event["id"]] = event["type"]
            assert set(ids.values()) == wanted, ids
            assert ids == {by_type[t]["id"]: t for t in wanted}
    finally:
        server.stop()
        orders_httpd.shutdown()
        declines_httpd.shutdown()


def pay_and_receive(client: Client, received: Any) -> Tuple[Dict[str, str], bytes]:
    """Pays a new order; returns the delivery of its ``payment.succeeded``."""
    reference = order("roll")
    paid = client.pay(IdempotencyKey.for_operation(reference, "pay"), Amount.of("15.00", "RUB"), reference, "tok_ok")
    assert isinstance(paid.outcome, Paid)
    deadline = time.monotonic() + DELIVERY_TIMEOUT
    while True:
        headers, body = received.get(timeout=max(0.1, deadline - time.monotonic()))
        if json.loads(body)["data"]["payment"]["reference"] == reference:
            return headers, body


def test_a_secret_roll_puts_two_verifiable_signatures_on_a_delivery() -> None:
    httpd, received = webhook_receiver()
    server = Server(["--relay-interval", "200ms"])
    try:
        with Client(server.url, SHOP, SECRET, POLICY) as client:
            made = client.create_webhook_endpoint(
                f"http://127.0.0.1:{httpd.server_address[1]}/hook", ["payment.succeeded"],
                IdempotencyKey.for_operation(order("roll-ep"), "make"))
            assert made.secret is not None
            old = made.secret

            headers, body = pay_and_receive(client, received)
            assert headers["chargeonce-signature"].count("v1=") == 1
            verify(old, headers["chargeonce-signature"], body)

            roll = IdempotencyKey.for_operation(made.id, "roll-1")
            rolled = client.roll_webhook_endpoint_secret(made.id, roll, expire_old_in_seconds=3600)
            assert rolled.secret is not None and rolled.secret != old
            assert rolled.previous_secret_expires_at is not None
            new = rolled.secret
            replay = client.roll_webhook_endpoint_secret(made.id, roll, expire_old_in_seconds=3600)
            assert (replay.secret, replay.replayed) == (None, True), "a repeat rolls nothing"

            # During the overlap: one signature per secret, each verifies.
            headers, body = pay_and_receive(client, received)
            signature = headers["chargeonce-signature"]
            assert signature.count("v1=") == 2, signature
            verify(old, signature, body)
            verify(new, signature, body)

            # A roll with no overlap: only the newest signs; the one it replaced no longer verifies.
            newest = client.roll_webhook_endpoint_secret(
                made.id, IdempotencyKey.for_operation(made.id, "roll-2"), expire_old_in_seconds=0).secret
            assert newest is not None
            headers, body = pay_and_receive(client, received)
            signature = headers["chargeonce-signature"]
            assert signature.count("v1=") == 1, signature
            verify(newest, signature, body)
            assert rejects(new, signature, body) and rejects(old, signature, body)
    finally:
        server.stop()
        httpd.shutdown()
