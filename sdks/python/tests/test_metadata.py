"""A payment's ``metadata`` against a real server, with the sync and the async
client: sent with ``pay``, returned on the payment and on reads, part of the
request (the same key with other metadata is :class:`KeyReused`), and refused
outside its limits with ``invalid_request`` naming the field."""
from __future__ import annotations

import asyncio
import uuid

import pytest

from chargeonce import Amount, AsyncClient, Client, IdempotencyKey, KeyReused, Paid, ProblemError, RetryPolicy
from chargeonce._client import payment_body
from harness import SECRET, SHOP, Server

AMOUNT = Amount.of("15.00", "RUB")
POLICY = RetryPolicy(budget=10.0)
METADATA = {"order_id": "6735", "customer": "cus_42", "note": "привет"}


def test_the_body_carries_metadata_only_when_given() -> None:
    assert b"metadata" not in payment_body(AMOUNT, "o", "tok_ok")
    assert b'"metadata":{"a":"1"}' in payment_body(AMOUNT, "o", "tok_ok", {"a": "1"})


def test_metadata_is_sent_returned_and_part_of_the_request(server: Server) -> None:
    ref = f"metadata-{uuid.uuid4().hex[:8]}"
    key = IdempotencyKey.for_operation(ref, "pay")
    with Client(server.url, SHOP, SECRET, POLICY) as client:
        paid = client.pay(key, AMOUNT, ref, "tok_ok", metadata=METADATA)
        assert isinstance(paid.outcome, Paid), paid.outcome
        assert paid.outcome.payment.metadata == METADATA
        assert client.payment(paid.outcome.payment.id).metadata == METADATA
        with pytest.raises(KeyReused):
            client.pay(key, AMOUNT, ref, "tok_ok", metadata={**METADATA, "note": "другое"})
        plain = client.pay(IdempotencyKey.for_operation(f"{ref}-b", "pay"), AMOUNT, f"{ref}-b", "tok_ok")
        assert isinstance(plain.outcome, Paid) and plain.outcome.payment.metadata == {}
        with pytest.raises(ProblemError) as refused:
            client.pay(IdempotencyKey.for_operation(f"{ref}-c", "pay"), AMOUNT, f"{ref}-c", "tok_ok",
                       metadata={"k" * 41: "v"})
        assert refused.value.problem.code == "invalid_request"
        assert refused.value.problem.raw.get("field", "").startswith("metadata.")


def test_the_async_client_sends_and_reads_metadata(server: Server) -> None:
    async def run() -> None:
        ref = f"metadata-async-{uuid.uuid4().hex[:8]}"
        async with AsyncClient(server.url, SHOP, SECRET, POLICY) as client:
            paid = await client.pay(IdempotencyKey.for_operation(ref, "pay"), AMOUNT, ref, "tok_ok", metadata=METADATA)
            assert isinstance(paid.outcome, Paid), paid.outcome
            assert (await client.payment(paid.outcome.payment.id)).metadata == METADATA

    asyncio.run(run())
