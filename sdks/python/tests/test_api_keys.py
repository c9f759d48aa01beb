"""The shop's API keys (``/v1/api-keys``): how a make's answers are judged
(a fake transport), then the sync and the async client against a real
server: a ``read_only`` key made with the shop's full key reads but may not
POST (403 ``insufficient_scope``); the same make again answers the same key
without its secret; a roll with no overlap hands over to the successor at
once (the old key is 401 ``api_key_expired``); a revoked key is 401
``api_key_revoked``; a make whose answer is lost is retried with the same
key and body and answered by the replay."""
from __future__ import annotations

import asyncio
import dataclasses
import json
import uuid
from typing import Any, Dict, List

import httpx
import pytest

from chargeonce import (
    Amount,
    ApiKey,
    ApiKeyScope,
    ApiKeyState,
    AsyncClient,
    Client,
    IdempotencyKey,
    KeyReused,
    ProblemCode,
    ProblemError,
    RetryPolicy,
    Unavailable,
    api_key_body,
    roll_api_key_body,
)

from harness import SECRET, SHOP, Server

BASE = "http://chargeonce.test"
POLICY = RetryPolicy(budget=10.0, attempt_timeout=5.0, base_delay=0.02, max_delay=0.2)


def key_json(**extra: Any) -> Dict[str, Any]:
    return {"id": "key_01a2297968c07d11b0f4c7e8e0d6a3b1", "object": "api_key", "livemode": True,
            "scope": "read_only", "prefix": "sk_live_4f3a", "description": None, "state": "active",
            "created_at": "2026-12-06T10:00:00.000Z", "expires_at": None, "revoked_at": None,
            "last_used_at": None, **extra}


def fake_client(answers: List[httpx.Response], seen: List[httpx.Request]) -> Client:
    def fake(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return answers.pop(0)

    return Client(BASE, "s", "sk", POLICY, http=httpx.Client(transport=httpx.MockTransport(fake)))


def test_the_model_reads_a_key_and_hides_its_secret() -> None:
    made = ApiKey.from_json(key_json(secret="sk_live_4f3a9c0e"))
    assert (made.scope, made.state, made.secret, made.replayed) == ("read_only", "active", "sk_live_4f3a9c0e", False)
    assert made.scope == ApiKeyScope.READ_ONLY and made.state == ApiKeyState.ACTIVE
    assert "9c0e" not in repr(made)
    assert made.raw["prefix"] == "sk_live_4f3a"
    assert ApiKey.from_json(key_json()).secret is None
    with pytest.raises(KeyError):
        ApiKey.from_json({k: v for k, v in key_json().items() if k != "state"})
    assert "replayed" not in {f.name for f in dataclasses.fields(ApiKey) if f.metadata.get("wire", True)}


def test_the_bodies() -> None:
    assert json.loads(api_key_body(ApiKeyScope.READ_ONLY)) == {"scope": "read_only"}
    assert json.loads(api_key_body("payments", "checkout", "2027-01-01T00:00:00Z")) == {
        "scope": "payments", "description": "checkout", "expires_at": "2027-01-01T00:00:00Z"}
    assert roll_api_key_body() == b"{}"
    assert roll_api_key_body(0) == b'{"expire_old_in_seconds":0}'


def test_a_make_is_retried_with_the_same_key_and_bytes_and_a_refusal_is_not() -> None:
    seen: List[httpx.Request] = []
    answers = [
        httpx.Response(503, json={"status": 503, "code": "store_unavailable", "detail": "x"},
                       headers={"content-type": "application/problem+json"}),
        httpx.Response(201, json=key_json(), headers={"idempotent-replayed": "true"}),
    ]
    with fake_client(answers, seen) as client:
        made = client.create_api_key(ApiKeyScope.READ_ONLY, "make-1", description="support")
    assert made.replayed and made.secret is None
    assert len(seen) == 2 and seen[0].content == seen[1].content
    assert {r.headers["idempotency-key"] for r in seen} == {"make-1"}
    limit = httpx.Response(409, json={"status": 409, "code": "api_key_limit_reached", "detail": "32"},
                           headers={"content-type": "application/problem+json"})
    seen.clear()
    with fake_client([limit], seen) as client, pytest.raises(ProblemError) as refused:
        client.create_api_key("full", "make-2")
    assert refused.value.code == ProblemCode.API_KEY_LIMIT_REACHED and len(seen) == 1
    down = [httpx.Response(503, text="down") for _ in range(50)]
    quick = RetryPolicy(budget=0.3, attempt_timeout=0.2, base_delay=0.01, max_delay=0.05)
    with Client(BASE, "s", "sk", quick, http=httpx.Client(transport=httpx.MockTransport(lambda r: down.pop()))) as c:
        with pytest.raises(Unavailable):
            c.revoke_api_key("key_1", "revoke-1")


def order(label: str) -> str:
    return f"{label}-{uuid.uuid4().hex[:12]}"


def refusal(error: ProblemError) -> Any:
    return error.status, error.code


def check_keys(server: Server, client: Any, call: Any) -> None:
    """The scenario, for either client (``call`` runs a method of it)."""
    make = IdempotencyKey.for_operation(order("support"), "make-key")
    made: ApiKey = call(client.create_api_key, ApiKeyScope.READ_ONLY, make, description="support tool")
    assert made.id.startswith("key_") and made.scope == "read_only" and made.state == "active"
    assert not made.replayed and made.secret is not None and made.description == "support tool"

    with Client(server.url, SHOP, made.secret, POLICY) as reader:
        assert reader.list_payments(limit=1).object == "list"
        ref = order("read-only")
        with pytest.raises(ProblemError) as scope:
            reader.pay(IdempotencyKey.for_operation(ref, "pay"), Amount.of("10.00", "RUB"), ref, "tok_ok")
        assert refusal(scope.value) == (403, ProblemCode.INSUFFICIENT_SCOPE)

        again: ApiKey = call(client.create_api_key, ApiKeyScope.READ_ONLY, make, description="support tool")
        assert (again.id, again.secret, again.replayed) == (made.id, None, True)
        with pytest.raises(KeyReused):
            call(client.create_api_key, ApiKeyScope.PAYMENTS, make)
        listed: List[ApiKey] = call(client.list_api_keys)
        assert [k.id for k in listed].count(made.id) == 1 and all(k.secret is None for k in listed)
        assert call(client.api_key, made.id).secret is None

        roll = IdempotencyKey.for_operation(made.id, "roll-1")
        successor: ApiKey = call(client.roll_api_key, made.id, roll, expire_old_in_seconds=0)
        assert successor.id != made.id and successor.scope == "read_only" and successor.secret
        replayed: ApiKey = call(client.roll_api_key, made.id, roll, expire_old_in_seconds=0)
        assert (replayed.id, replayed.secret, replayed.replayed) == (successor.id, None, True)
        with Client(server.url, SHOP, successor.secret, POLICY) as next_reader:
            next_reader.list_payments(limit=1)
            with pytest.raises(ProblemError) as expired:
                reader.list_payments(limit=1)
            assert refusal(expired.value) == (401, ProblemCode.API_KEY_EXPIRED)
            assert call(client.api_key, made.id).state == ApiKeyState.EXPIRED
            with pytest.raises(ProblemError) as inactive:
                call(client.roll_api_key, made.id, IdempotencyKey.for_operation(made.id, "roll-2"))
            assert refusal(inactive.value) == (409, ProblemCode.API_KEY_INACTIVE)

            revoke = IdempotencyKey.for_operation(successor.id, "revoke")
            revoked: ApiKey = call(client.revoke_api_key, successor.id, revoke)
            assert revoked.state == "revoked" and revoked.revoked_at is not None
            with pytest.raises(ProblemError) as gone:
                next_reader.list_payments(limit=1)
            assert refusal(gone.value) == (401, ProblemCode.API_KEY_REVOKED)
            assert call(client.revoke_api_key, successor.id, revoke).revoked_at == revoked.revoked_at


def test_keys_are_made_rolled_and_revoked(server: Server) -> None:
    with Client(server.url, SHOP, SECRET, POLICY) as client:
        check_keys(server, client, lambda fn, *args, **kw: fn(*args, **kw))


def test_the_async_client_manages_keys(server: Server) -> None:
    async def run() -> None:
        async with AsyncClient(server.url, SHOP, SECRET, POLICY) as client:
            loop = asyncio.get_running_loop()

            def call(fn: Any, *args: Any, **kw: Any) -> Any:
                return asyncio.run_coroutine_threadsafe(fn(*args, **kw), loop).result(30)

            await asyncio.to_thread(check_keys, server, client, call)

    asyncio.run(run())


def test_a_make_whose_answer_is_lost_is_replayed_without_its_secret(server: Server, proxy: Any) -> None:
    lost = {"n": 0}

    def lose(method: str, path: str, headers: dict) -> bool:
        if method == "POST" and path == "/v1/api-keys" and lost["n"] == 0:
            lost["n"] += 1
            return True
        return False

    through = proxy(lose)
    make = IdempotencyKey.for_operation(order("lost"), "make-key")
    with Client(through.url, SHOP, SECRET, POLICY) as client:
        made = client.create_api_key(ApiKeyScope.PAYMENTS, make)
    # The first attempt made the key; its answer (with the secret) was lost.
    assert made.replayed and made.secret is None and made.scope == "payments"
    sent = through.recorded(make.value)
    assert len(sent) == 2 and sent[0].body == sent[1].body
