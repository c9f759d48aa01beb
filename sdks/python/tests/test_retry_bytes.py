"""Issue 16: every retry carries the same key and the same body bytes (the fault
proxy records what it receives), and a 422 key mismatch is never retried."""
from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Dict

import pytest

from chargeonce import Amount, AsyncClient, Client, IdempotencyKey, KeyReused, Paid, RetryPolicy

from harness import SECRET, SHOP, Recorded
from scenarios import check_recorded

POLICY = RetryPolicy(budget=60, base_delay=0.05, max_delay=0.2)
AMOUNT = Amount.from_json({"value": "15.00", "currency": "RUB"})
OTHER = Amount.from_json({"value": "16.00", "currency": "RUB"})


def lose_first(n: int):
    """Lose the first ``n`` answers of ``POST /v1/payments`` for each key."""
    lost: Dict[str, int] = {}
    lock = threading.Lock()

    def lose(method: str, path: str, headers: dict) -> bool:
        key = headers.get("idempotency-key")
        if method != "POST" or path != "/v1/payments" or key is None:
            return False
        with lock:
            if lost.get(key, 0) < n:
                lost[key] = lost.get(key, 0) + 1
                return True
        return False

    return lose


def order(flavour: str) -> str:
    return f"bytes-{flavour}-{uuid.uuid4().hex[:8]}"


def assert_three_identical(p, key: IdempotencyKey) -> None:
    sent = p.recorded(key.value)
    assert len(sent) == 3, sent
    assert {(r.method, r.path, r.key) for r in sent} == {("POST", "/v1/payments", key.value)}
    assert len({r.body for r in sent}) == 1 and sent[0].body, [r.body for r in sent]
    assert check_recorded(p.recorded()) is None


def test_lost_answers_are_retried_with_the_same_key_and_body_bytes(proxy) -> None:
    p = proxy(lose_first(2))

    ref = order("sync")
    key = IdempotencyKey.for_operation(ref, "pay")
    with Client(p.url, SHOP, SECRET, POLICY) as client:
        result = client.pay(key, AMOUNT, ref, "tok_ok")
    assert isinstance(result.outcome, Paid), result.outcome
    assert len(result.attempts) == 3
    assert_three_identical(p, key)

    ref = order("async")
    key = IdempotencyKey.for_operation(ref, "pay")

    async def pay_async():
        async with AsyncClient(p.url, SHOP, SECRET, POLICY) as client:
            return await client.pay(key, AMOUNT, ref, "tok_ok")

    result = asyncio.run(pay_async())
    assert isinstance(result.outcome, Paid), result.outcome
    assert len(result.attempts) == 3
    assert_three_identical(p, key)
    assert p.lost == 4


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_key_mismatch_is_never_retried(proxy, flavour: str) -> None:
    p = proxy(lambda method, path, headers: False)
    ref = order(f"422-{flavour}")
    key = IdempotencyKey.for_operation(ref, "pay")

    if flavour == "sync":
        with Client(p.url, SHOP, SECRET, POLICY) as client:
            assert isinstance(client.pay(key, AMOUNT, ref, "tok_ok").outcome, Paid)
            before = len(p.recorded(key.value))
            with pytest.raises(KeyReused) as raised:
                client.pay(key, OTHER, ref, "tok_ok")
    else:
        async def run():
            async with AsyncClient(p.url, SHOP, SECRET, POLICY) as client:
                assert isinstance((await client.pay(key, AMOUNT, ref, "tok_ok")).outcome, Paid)
                count = len(p.recorded(key.value))
                with pytest.raises(KeyReused) as raised:
                    await client.pay(key, OTHER, ref, "tok_ok")
                return count, raised

        before, raised = asyncio.run(run())

    assert raised.value.status == 422
    assert raised.value.attempts == 1
    assert before == 1
    second = p.recorded(key.value)[before:]
    assert len(second) == 1, second
    assert second[0].method == "POST" and second[0].path == "/v1/payments"
    assert b"16.00" in second[0].body


def rec(key, body=b"{}", method="POST", path="/v1/payments") -> Recorded:
    return Recorded(method, path, key, body)


def test_the_recording_check() -> None:
    assert check_recorded([rec("k"), rec(None), rec("k"), rec("j", b"x")]) is None
    assert "body" in check_recorded([rec("k"), rec("k", b'{"a":1}')])  # type: ignore[operator]
    assert "path" in check_recorded([rec("k"), rec("k", path="/v1/other")])  # type: ignore[operator]
    assert "method" in check_recorded([rec("k"), rec("k", method="PUT")])  # type: ignore[operator]
    assert "more than once" in check_recorded([rec("k"), rec("j"), rec(None), rec(None)])  # type: ignore[operator]
    assert "more than once" in check_recorded([])  # type: ignore[operator]
