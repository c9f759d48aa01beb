"""Authorize, capture in parts, void: how their answers are judged and retried
(a fake transport), then the sync and the async client against a real server:
two shipments captured under their own keys and refunded in part, a capture
replayed, one refused for more than is capturable, a void of an untouched
authorization, a tok_timeout capture resolved by the client's own retries, and
a capture whose answers are lost behind a proxy, retried with the same bytes."""
from __future__ import annotations

import asyncio
import json
import threading
import uuid
from typing import Any, Dict, List

import httpx
import pytest

from chargeonce import (
    Amount,
    AsyncClient,
    Authorized,
    CaptureFailed,
    CaptureRefused,
    Captured,
    CaptureUncertain,
    Client,
    IdempotencyKey,
    KeyReused,
    Paid,
    PaymentStatus,
    ProblemCode,
    Refunded,
    RetryPolicy,
    VoidFailed,
    VoidRefused,
    VoidReleased,
    VoidUncertain,
    VoidVoided,
    capture_body,
    payment_body,
)
from chargeonce._judge import Done, KeyedCall, Sleep, judge_capture, judge_payment, judge_void, uncertain_capture

from harness import SECRET, SHOP, Server
from scenarios import check_recorded

BASE = "http://chargeonce.test"
RUB = "RUB"


def rub(value: str) -> Amount:
    return Amount.of(value, RUB)


def payment(status: str, **extra: Any) -> Dict[str, Any]:
    return {"id": "pay_1", "object": "payment", "shop_id": "s", "status": status,
            "amount": {"value": "1500.00", "currency": RUB}, "reference": "o", "provider_payment_id": "ch_1",
            "decline_code": None, "created_at": "2026-12-05T00:00:00.000Z",
            "amount_refunded": {"value": "0.00", "currency": RUB}, "refund_status": "none", "metadata": {},
            "capture_method": "manual", "amount_capturable": {"value": "1500.00", "currency": RUB},
            "amount_captured": {"value": "0.00", "currency": RUB},
            "authorization_expires_at": "2026-12-12T00:00:00.000Z", **extra}


def capture(status: str, **extra: Any) -> Dict[str, Any]:
    return {"id": "cap_1", "object": "capture", "payment_id": "pay_1", "shop_id": "s", "status": status,
            "amount": {"value": "1000.00", "currency": RUB}, "final": False, "provider_capture_id": None,
            "failure_code": None, "created_at": "2026-12-05T00:00:01.000Z", **extra}


def problem(status: int, code: str, **extra: Any) -> httpx.Response:
    body = {"type": f"urn:chargeonce:problem:{code}", "title": "t", "status": status, "detail": "d",
            "code": code, "request_id": "req-1", **extra}
    return httpx.Response(status, json=body, headers={"content-type": "application/problem+json", "retry-after": "0"})


def ok(status: int, body: Dict[str, Any], **headers: str) -> httpx.Response:
    return httpx.Response(status, json=body, headers=headers)


class Fake:
    """Answers in turn; records what was sent."""

    def __init__(self, answers: List[httpx.Response]) -> None:
        self.answers = answers
        self.sent: List[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        return self.answers.pop(0)


FAST = RetryPolicy(base_delay=0.001, max_delay=0.001)


def fake_client(answers: List[httpx.Response], policy: RetryPolicy = FAST) -> "tuple[Client, Fake]":
    fake = Fake(answers)
    return Client(BASE, "s", "sk", policy, http=httpx.Client(transport=httpx.MockTransport(fake))), fake


# -- judgement, without a network ------------------------------------------------


def answer(response: httpx.Response) -> Any:
    from chargeonce._client import _answer

    return _answer(response)


def test_an_authorization_is_its_own_outcome_never_paid() -> None:
    for status in ("authorized", "partially_captured"):
        _, step, named = judge_payment(answer(ok(201, payment(status))), 1, 0.0)
        assert isinstance(step, Done) and isinstance(step.value, Authorized) and named == "pay_1"
    # Pending (tok_timeout lost the authorization's answer): asked again.
    _, step, _ = judge_payment(answer(ok(202, payment("pending"), **{"retry-after": "1"})), 1, 0.0)
    assert not isinstance(step, Done)
    _, step, _ = judge_payment(answer(ok(201, payment("succeeded"))), 1, 0.0)
    assert isinstance(step, Done) and isinstance(step.value, Paid)


def test_the_bodies_carry_only_what_was_given() -> None:
    assert b"capture_method" not in payment_body(rub("15.00"), "o", "tok_ok")
    assert payment_body(rub("15.00"), "o", "tok_ok", capture_method="manual").endswith(b',"capture_method":"manual"}')
    assert capture_body() == b"{}"
    assert capture_body(rub("1000.00")) == b'{"amount":{"value":"1000.00","currency":"RUB"}}'
    assert capture_body(rub("500.00"), True) == b'{"amount":{"value":"500.00","currency":"RUB"},"final":true}'


def test_capture_answers() -> None:
    _, step, named = judge_capture(answer(ok(201, capture("succeeded"))), 1, 0.0)
    assert isinstance(step, Done) and isinstance(step.value, Captured) and named == "cap_1"
    _, step, named = judge_capture(answer(ok(202, capture("pending"), **{"retry-after": "1"})), 1, 0.0)
    assert not isinstance(step, Done) and named == "cap_1"
    failed = capture("failed", failure_code="do_not_honor")
    _, step, _ = judge_capture(answer(problem(422, "capture_failed", capture=failed, failure_code="do_not_honor")), 1, 0.0)
    assert isinstance(step, Done) and isinstance(step.value, CaptureFailed)
    assert step.value.capture.failure_code == "do_not_honor"
    for status, code, extra in [
        (422, "capture_exceeds_capturable", {"amount_capturable": {"value": "500.00", "currency": RUB}}),
        (409, "payment_not_capturable", {"payment_status": "voided"}),
        (422, "currency_mismatch", {}),
        (404, "not_found", {}),
    ]:
        _, step, _ = judge_capture(answer(problem(status, code, **extra)), 1, 0.0)
        assert isinstance(step, Done) and step.refusal and isinstance(step.value, CaptureRefused), code
        assert step.value.code == code and step.value.status == status
    _, step, _ = judge_capture(answer(problem(422, "capture_exceeds_capturable",
                                              amount_capturable={"value": "500.00", "currency": RUB})), 1, 0.0)
    assert isinstance(step, Done) and step.value.amount_capturable == rub("500.00")
    # Retried with the same key: busy, in progress, the acquirer unreachable (the capture will be sent).
    for status, code, extra in [(409, "authorization_busy", {}), (409, "request_in_progress", {}),
                                (503, "acquirer_unavailable", {"capture": capture("pending")}),
                                (503, "store_unavailable", {})]:
        _, step, _ = judge_capture(answer(problem(status, code, **extra)), 1, 0.0)
        assert not isinstance(step, Done), code


def test_void_answers() -> None:
    voided = payment("voided", amount_capturable={"value": "0.00", "currency": RUB})
    _, step, _ = judge_void(answer(ok(200, voided)), 1, 0.0)
    assert isinstance(step, Done) and isinstance(step.value, VoidVoided)
    released = payment("succeeded", amount_captured={"value": "1000.00", "currency": RUB},
                       amount_capturable={"value": "0.00", "currency": RUB})
    _, step, _ = judge_void(answer(ok(200, released)), 1, 0.0)
    assert isinstance(step, Done) and isinstance(step.value, VoidReleased)
    _, step, named = judge_void(answer(ok(202, payment("partially_captured"), **{"retry-after": "1"})), 1, 0.0)
    assert not isinstance(step, Done) and named == "pay_1"
    _, step, _ = judge_void(answer(problem(422, "void_failed", payment=payment("authorized"), failure_code="x")), 1, 0.0)
    assert isinstance(step, Done) and step.value == VoidFailed(step.value.payment, "x")
    for status, code in [(409, "payment_not_voidable"), (404, "not_found")]:
        _, step, _ = judge_void(answer(problem(status, code, payment_status="succeeded")), 1, 0.0)
        assert isinstance(step, Done) and isinstance(step.value, VoidRefused) and step.value.code == code
    _, step, _ = judge_void(answer(problem(409, "authorization_busy")), 1, 0.0)
    assert not isinstance(step, Done)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def busy_call(budget: float) -> "tuple[KeyedCall[Any], Clock]":
    clock = Clock()
    return KeyedCall(RetryPolicy(budget=budget), judge_capture, uncertain_capture, b"{}", False,
                     clock=clock, rng=lambda lo, hi: 0.0), clock


def test_busy_until_the_budget_ends_is_refused_busy_never_uncertain() -> None:
    call, clock = busy_call(2.5)
    busy = answer(problem(409, "authorization_busy"))
    while True:
        decision = call.on_answer(busy, 0.01)
        if not isinstance(decision, Sleep):
            break
        clock.now += max(decision.seconds, 1.0)
    assert isinstance(decision, Done) and isinstance(decision.value, CaptureRefused)
    assert decision.value.code == ProblemCode.AUTHORIZATION_BUSY


def test_after_an_attempt_that_may_have_executed_a_refusal_proves_nothing() -> None:
    call, clock = busy_call(2.5)
    assert isinstance(call.on_failure("lost", "closed", 0.01), Sleep)
    busy = answer(problem(409, "authorization_busy"))
    while True:
        decision = call.on_answer(busy, 0.01)
        if not isinstance(decision, Sleep):
            break
        clock.now += max(decision.seconds, 1.0)
    assert decision == Done(CaptureUncertain(None))
    call, _ = busy_call(60)
    assert isinstance(call.on_failure("timeout", "no answer", 20), Sleep)
    decision = call.on_answer(answer(problem(422, "capture_exceeds_capturable")), 0.01)
    assert decision == Done(CaptureUncertain(None))


def test_capture_retries_with_the_same_key_and_bytes_until_it_ends() -> None:
    client, fake = fake_client([
        ok(202, capture("pending"), **{"retry-after": "0"}),
        problem(409, "request_in_progress"),
        problem(503, "acquirer_unavailable", capture=capture("pending")),
        ok(201, capture("succeeded", provider_capture_id="cp_1"), **{"idempotent-replayed": "true"}),
    ])
    key = IdempotencyKey.for_operation("order-123", "capture-1")
    with client:
        result = client.capture("pay_1", key, rub("1000.00"))
    assert isinstance(result.outcome, Captured) and result.capture is not None and result.replayed
    assert [a.status for a in result.attempts] == [202, 409, 503, 201]
    assert {r.url.path for r in fake.sent} == {"/v1/payments/pay_1/captures"}
    assert {r.headers["idempotency-key"] for r in fake.sent} == {"order-123-capture-1"}
    assert {r.content for r in fake.sent} == {b'{"amount":{"value":"1000.00","currency":"RUB"}}'}
    assert all("prefer" not in r.headers for r in fake.sent)


def test_a_capture_pending_past_the_budget_is_uncertain_with_its_id() -> None:
    client, _ = fake_client([ok(202, capture("pending"), **{"retry-after": "1"}) for _ in range(5)],
                            RetryPolicy(budget=1.5))
    with client:
        result = client.capture("pay_1", "order-123-capture-1", rub("1000.00"))
    assert result.outcome == CaptureUncertain("cap_1") and result.capture is None


def test_a_refused_capture_and_a_reused_key_are_one_attempt() -> None:
    client, fake = fake_client([problem(409, "payment_not_capturable", payment_status="voided"),
                                problem(422, "idempotency_key_reused")])
    with client:
        refused = client.capture("pay_1", "o-capture-1")
        assert isinstance(refused.outcome, CaptureRefused) and refused.outcome.payment_status == "voided"
        assert len(refused.attempts) == 1
        with pytest.raises(KeyReused):
            client.capture("pay_1", "o-capture-1", rub("1.00"))
    assert [r.content for r in fake.sent] == [b"{}", b'{"amount":{"value":"1.00","currency":"RUB"}}']


def test_void_retries_202_and_busy_with_the_same_key() -> None:
    client, fake = fake_client([
        problem(409, "authorization_busy"),
        ok(202, payment("partially_captured"), **{"retry-after": "0"}),
        ok(200, payment("succeeded", amount_captured={"value": "1000.00", "currency": RUB})),
    ])
    with client:
        result = client.void("pay_1", IdempotencyKey.for_operation("o", "void"))
    assert isinstance(result.outcome, VoidReleased) and result.payment is not None
    assert {(r.url.path, r.headers["idempotency-key"], r.content) for r in fake.sent} == {
        ("/v1/payments/pay_1/void", "o-void", b"{}")}
    client, _ = fake_client([ok(202, payment("authorized"), **{"retry-after": "1"}) for _ in range(5)],
                            RetryPolicy(budget=1.5))
    with client:
        assert client.void("pay_1", "o-void").outcome == VoidUncertain("pay_1")


def test_pay_order_finds_an_authorization_of_the_order() -> None:
    listing = httpx.Response(200, json={"object": "list", "data": [payment("authorized")], "has_more": False})
    client, fake = fake_client([listing])
    with client:
        result = client.pay_order("o-pay", rub("1500.00"), "o", "tok_ok", capture_method="manual")
    assert isinstance(result.outcome, Authorized) and result.found_before_paying and result.payment is not None
    assert [r.method for r in fake.sent] == ["GET"]


async def test_the_async_client_captures_and_voids() -> None:
    fake = Fake([ok(202, capture("pending"), **{"retry-after": "0"}), ok(201, capture("succeeded")),
                 ok(200, payment("voided"))])
    async with AsyncClient(BASE, "s", "sk", FAST, http=httpx.AsyncClient(transport=httpx.MockTransport(fake))) as client:
        captured = await client.capture("pay_1", "o-capture-1", rub("1000.00"), False)
        assert isinstance(captured.outcome, Captured) and len(captured.attempts) == 2
        voided = await client.void("pay_1", "o-void")
        assert isinstance(voided.outcome, VoidVoided)
    assert fake.sent[0].content == b'{"amount":{"value":"1000.00","currency":"RUB"},"final":false}'


# -- against a real server ----------------------------------------------------------


POLICY = RetryPolicy(budget=30, base_delay=0.05, max_delay=0.5)


def order(flavour: str) -> str:
    return f"order-{flavour}-{uuid.uuid4().hex[:8]}"


def test_two_shipments_a_refund_a_replay_a_refusal_and_a_void(server: Server) -> None:
    ref = order("sync")
    with Client(server.url, SHOP, SECRET, POLICY) as client:
        authorized = client.authorize(IdempotencyKey.for_operation(ref, "pay"), rub("1500.00"), ref, "tok_ok")
        assert isinstance(authorized.outcome, Authorized), authorized.outcome
        held = authorized.outcome.payment
        assert (held.status, held.capture_method) == (PaymentStatus.AUTHORIZED.value, "manual")
        assert held.amount_capturable == rub("1500.00") and held.amount_captured.decimal == 0
        assert held.authorization_expires_at is not None

        first_key = IdempotencyKey.for_operation(ref, "capture-1")
        assert first_key.value == f"{ref}-capture-1"
        first = client.capture(held.id, first_key, rub("1000.00"))
        assert isinstance(first.outcome, Captured), first.outcome
        assert first.outcome.capture.amount == rub("1000.00") and not first.outcome.capture.final
        assert client.payment(held.id).status == PaymentStatus.PARTIALLY_CAPTURED.value

        replay = client.capture(held.id, first_key, rub("1000.00"))
        assert isinstance(replay.outcome, Captured) and replay.replayed and len(replay.attempts) == 1
        assert replay.outcome.capture == first.outcome.capture

        too_much = client.capture(held.id, IdempotencyKey.for_operation(ref, "capture-x"), rub("600.00"))
        assert isinstance(too_much.outcome, CaptureRefused), too_much.outcome
        assert too_much.outcome.code == ProblemCode.CAPTURE_EXCEEDS_CAPTURABLE and too_much.outcome.status == 422
        assert too_much.outcome.amount_capturable == rub("500.00") and len(too_much.attempts) == 1

        second = client.capture(held.id, IdempotencyKey.for_operation(ref, "capture-2"), rub("500.00"))
        assert isinstance(second.outcome, Captured), second.outcome
        refunded = client.refund(held.id, IdempotencyKey.for_operation(ref, "refund-1"), rub("200.00"))
        assert isinstance(refunded.outcome, Refunded), refunded.outcome

        final = client.payment(held.id)
        assert final.status == PaymentStatus.SUCCEEDED.value
        assert final.amount_captured == rub("1500.00") and final.amount_capturable.decimal == 0
        assert final.amount_refunded == rub("200.00")
        listed = list(client.iter_payment_captures(held.id, limit=1))
        assert [c.id for c in listed] == [second.outcome.capture.id, first.outcome.capture.id]
        assert client.capture_by_id(first.outcome.capture.id) == first.outcome.capture
        assert isinstance(client.void(held.id, IdempotencyKey.for_operation(ref, "void")).outcome, VoidRefused)

        # An authorization nobody captured, voided: nothing taken; its key replays.
        other = order("sync-void")
        untouched = client.authorize(IdempotencyKey.for_operation(other, "pay"), rub("300.00"), other, "tok_ok")
        assert isinstance(untouched.outcome, Authorized)
        void_key = IdempotencyKey.for_operation(other, "void")
        voided = client.void(untouched.outcome.payment.id, void_key)
        assert isinstance(voided.outcome, VoidVoided), voided.outcome
        assert voided.outcome.payment.status == "voided" and voided.outcome.payment.amount_capturable.decimal == 0
        again = client.void(untouched.outcome.payment.id, void_key)
        assert isinstance(again.outcome, VoidVoided) and again.replayed
        late = client.capture(untouched.outcome.payment.id, IdempotencyKey.for_operation(other, "capture-1"))
        assert isinstance(late.outcome, CaptureRefused) and late.outcome.payment_status == "voided"


async def test_the_async_client_against_a_server(server: Server) -> None:
    ref = order("async")
    async with AsyncClient(server.url, SHOP, SECRET, POLICY) as client:
        authorized = await client.authorize(IdempotencyKey.for_operation(ref, "pay"), rub("1500.00"), ref, "tok_ok")
        assert isinstance(authorized.outcome, Authorized), authorized.outcome
        pid = authorized.outcome.payment.id
        for n, value in ((1, "1000.00"), (2, "500.00")):
            done = await client.capture(pid, IdempotencyKey.for_operation(ref, f"capture-{n}"), rub(value))
            assert isinstance(done.outcome, Captured), done.outcome
        assert isinstance((await client.refund(pid, IdempotencyKey.for_operation(ref, "refund-1"), rub("200.00"))).outcome,
                          Refunded)
        final = await client.payment(pid)
        assert (final.status, final.amount_captured) == ("succeeded", rub("1500.00"))
        captures = [c async for c in client.iter_payment_captures(pid)]
        assert len(captures) == 2 and (await client.capture_by_id(captures[0].id)).id == captures[0].id
        other = order("async-void")
        untouched = await client.authorize(IdempotencyKey.for_operation(other, "pay"), rub("300.00"), other, "tok_ok")
        assert isinstance(untouched.outcome, Authorized)
        voided = await client.void(untouched.outcome.payment.id, IdempotencyKey.for_operation(other, "void"))
        assert isinstance(voided.outcome, VoidVoided), voided.outcome


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_tok_timeout_authorization_and_captures_resolved_by_the_clients_retries(server: Server, flavour: str) -> None:
    """tok_timeout loses the answer of the authorization's first execution, then
    of each capture's and the void's: each ends by the client's own retries
    with the same key (202 first, then the stored answer)."""
    ref = order(f"timeout-{flavour}")

    async def run() -> None:
        async with AsyncClient(server.url, SHOP, SECRET, POLICY) as client:
            await check(client.authorize, client.capture, client.void, client.payment)

    async def check(authorize: Any, capture_: Any, void: Any, read: Any) -> None:
        async def call(fn: Any, *args: Any) -> Any:
            if flavour == "sync":
                return await asyncio.to_thread(fn, *args)
            return await fn(*args)

        authorized = await call(authorize, IdempotencyKey.for_operation(ref, "pay"), rub("1500.00"), ref, "tok_timeout")
        assert isinstance(authorized.outcome, Authorized), authorized.outcome
        assert authorized.attempts[0].status == 202 and len(authorized.attempts) >= 2
        pid = authorized.outcome.payment.id
        first = await call(capture_, pid, IdempotencyKey.for_operation(ref, "capture-1"), rub("1000.00"))
        assert isinstance(first.outcome, Captured), first.outcome
        assert first.attempts[0].status == 202 and first.attempts[-1].status == 201
        released = await call(void, pid, IdempotencyKey.for_operation(ref, "void"))
        assert isinstance(released.outcome, VoidReleased), released.outcome
        assert released.attempts[0].status == 202 and released.attempts[-1].status == 200
        final = await call(read, pid)
        assert (final.status, final.amount_captured, final.amount_capturable.decimal) == ("succeeded", rub("1000.00"), 0)

    if flavour == "async":
        asyncio.run(run())
    else:
        with Client(server.url, SHOP, SECRET, POLICY) as client:
            asyncio.run(check(client.authorize, client.capture, client.void, client.payment))


def test_lost_capture_answers_are_retried_with_the_same_key_and_bytes(server: Server, proxy: Any) -> None:
    lost: Dict[str, int] = {}
    lock = threading.Lock()

    def lose(method: str, path: str, headers: Dict[str, str]) -> bool:
        key = headers.get("idempotency-key", "")
        if method != "POST" or not path.endswith("/captures"):
            return False
        with lock:
            lost[key] = lost.get(key, 0) + 1
            return lost[key] <= 2

    p = proxy(lose)
    ref = order("lost")
    with Client(p.url, SHOP, SECRET, POLICY) as client:
        authorized = client.authorize(IdempotencyKey.for_operation(ref, "pay"), rub("1500.00"), ref, "tok_ok")
        assert isinstance(authorized.outcome, Authorized)
        key = IdempotencyKey.for_operation(ref, "capture-1")
        done = client.capture(authorized.outcome.payment.id, key, rub("1500.00"), True)
        assert isinstance(done.outcome, Captured) and done.outcome.capture.final, done.outcome
        assert [a.failure for a in done.attempts] == ["lost", "lost", None] and done.replayed
    sent = p.recorded(key.value)
    assert len(sent) == 3 and len({r.body for r in sent}) == 1 and check_recorded(p.recorded()) is None
    assert json.loads(sent[0].body) == {"amount": {"value": "1500.00", "currency": RUB}, "final": True}


@pytest.fixture(scope="module")
def expiring_server() -> Any:
    """Authorizations held one second, the expirer passing every 200 ms."""
    s = Server(["--authorization-ttl", "1s", "--expiry-interval", "200ms"])
    yield s
    s.stop()


def test_an_expired_authorization_refuses_captures_and_voids(expiring_server: Server) -> None:
    import time

    ref = order("expiry")
    with Client(expiring_server.url, SHOP, SECRET, POLICY) as client:
        held = client.authorize(IdempotencyKey.for_operation(ref, "pay"), rub("100.00"), ref, "tok_ok")
        assert isinstance(held.outcome, Authorized)
        pid = held.outcome.payment.id
        deadline = time.monotonic() + 15
        while (payment := client.payment(pid)).status != PaymentStatus.EXPIRED.value:
            assert time.monotonic() < deadline, f"not expired: {payment}"
            time.sleep(0.1)
        assert payment.amount_capturable.decimal == 0 and payment.amount_captured.decimal == 0
        late = client.capture(pid, IdempotencyKey.for_operation(ref, "capture-1"))
        assert isinstance(late.outcome, CaptureRefused) and late.outcome.payment_status == "expired", late.outcome
        void = client.void(pid, IdempotencyKey.for_operation(ref, "void"))
        assert isinstance(void.outcome, VoidRefused) and void.outcome.code == ProblemCode.PAYMENT_NOT_VOIDABLE
        # The authorization's own key still replays what it answered then.
        again = client.authorize(IdempotencyKey.for_operation(ref, "pay"), rub("100.00"), ref, "tok_ok")
        assert isinstance(again.outcome, Authorized) and again.replayed
