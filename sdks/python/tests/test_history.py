"""``payment_history`` (``GET /v1/payments/{id}/history``): the entries' parsing
(unknown types stay readable), then the sync and the async client against a
real server: a payment, its replay, a 422 with the same key and another amount,
and a partial refund, read back as the history; another shop's or an unknown
payment is ``not_found``."""
from __future__ import annotations

import asyncio
import time
import uuid
from typing import Iterator, List, Type, TypeVar

import pytest

from chargeonce import (
    AcquirerCallEntry,
    Amount,
    AnsweredEntry,
    AsyncClient,
    CancelRequestedEntry,
    ClaimedEntry,
    Client,
    EventAttemptEntry,
    EventResentEntry,
    FindingEntry,
    FindingResolvedEntry,
    HISTORY_ENTRY_TYPES,
    HistoryAcquirerCall,
    HistoryCallOutcome,
    HistorySettledBy,
    IdempotencyKey,
    KeyExpiredEntry,
    KeyReused,
    LinkedEntry,
    Paid,
    PaymentHistory,
    ProblemCode,
    ProblemError,
    RefundEndedEntry,
    CaptureReservedEntry,
    CaptureEndedEntry,
    ReleaseRequestedEntry,
    ReleaseEndedEntry,
    Refunded,
    RefundReservedEntry,
    RetryPolicy,
    SettledEntry,
    TakenOverEntry,
    UnknownHistoryEntry,
    WebhookReceivedEntry,
)

from harness import SECRET, SHOP, Server

OTHER_SHOP = "pytest-other"
OTHER_SECRET = "sk_pytest_other_0123456789abcdef"
AMOUNT = Amount.of("15.00", "RUB")
CHANGED = Amount.of("16.00", "RUB")
REFUND = Amount.of("5.00", "RUB")
POLICY = RetryPolicy(budget=30, base_delay=0.05, max_delay=0.5)
#: The server adds cached repeats to their keys' counts every this often.
FLUSH = "100ms"
#: How long the test waits for the counts to appear (many flushes).
DEADLINE = 15.0
UNKNOWN_ID = "pay_00000000000000000000000000000000"

E = TypeVar("E")


# -- parsing, without a server --------------------------------------------------

BASE = {"at": "2026-12-03T09:52:46.652Z", "refund_id": None}
TALLY = {"count": 2, "last_at": "2026-12-03T09:52:47Z"}
NONE = {"count": 0, "last_at": None}
ONE_OF_EACH = [
    {"type": "claimed", "key": "o-pay", "instance": "i1"},
    {"type": "linked", "key": "o2-pay", "instance": "i1"},
    {"type": "taken_over", "key": "o-pay", "instance": "i2", "recovery_point": "payment_created"},
    {"type": "acquirer_call", "call": "charge", "outcome": "unknown", "latency_ms": 5,
     "acquirer_key": "chargeonce-pay_1", "instance": "i2", "reason": "timeout"},
    {"type": "answered", "key": "o-pay", "status": 201},
    {"type": "settled", "status": "succeeded", "by": "webhook", "event_id": "evt_1"},
    {"type": "webhook_received", "event_id": "evt_2", "kind": "charge.succeeded"},
    {"type": "refund_reserved", "key": "o-refund-1", "amount": {"value": "5.00", "currency": "RUB"},
     "instance": "i1", "refund_id": "re_1"},
    {"type": "refund_ended", "status": "succeeded", "refund_id": "re_1"},
    {"type": "event_attempt", "event_id": "evt_3", "event_type": "payment.succeeded", "attempt": 1,
     "result": "failed", "status": 500},
    {"type": "event_resent", "event_id": "evt_3"},
    {"type": "key_expired", "key": "o-pay", "replays": TALLY, "conflicts": NONE, "mismatches": TALLY},
    {"type": "finding", "finding_id": 7, "kind": "duplicate_charge"},
    {"type": "finding_resolved", "finding_id": 7, "how": "refunded"},
    {"type": "cancel_requested", "key": "o-cancel", "instance": "i1"},
    {"type": "capture_reserved", "capture_id": "cap_1", "key": "o-capture-1",
     "amount": {"value": "4.00", "currency": "RUB"}, "final": False, "instance": "i1"},
    {"type": "capture_ended", "capture_id": "cap_1", "status": "succeeded"},
    {"type": "release_requested", "reason": "void", "key": "o-void", "instance": "i1"},
    {"type": "release_ended", "reason": "void", "released": True},
]


def history_json(entries: List[dict]) -> dict:
    return {
        "object": "payment_history",
        "payment_id": "pay_1",
        "entries": [{**BASE, "seq": n, **e} for n, e in enumerate(entries)],
        "keys": [{"key": "o-pay", "replays": TALLY, "conflicts": NONE, "mismatches": NONE}],
    }


def test_every_entry_type_is_parsed_into_its_class() -> None:
    history = PaymentHistory.from_json(history_json(ONE_OF_EACH))
    assert [type(e) for e in history.entries] == [
        ClaimedEntry, LinkedEntry, TakenOverEntry, AcquirerCallEntry, AnsweredEntry,
        SettledEntry, WebhookReceivedEntry, RefundReservedEntry, RefundEndedEntry, EventAttemptEntry, EventResentEntry,
        KeyExpiredEntry, FindingEntry, FindingResolvedEntry, CancelRequestedEntry,
        CaptureReservedEntry, CaptureEndedEntry, ReleaseRequestedEntry, ReleaseEndedEntry,
    ]
    assert {e.type for e in history.entries} == set(HISTORY_ENTRY_TYPES)
    assert [e.seq for e in history.entries] == list(range(len(ONE_OF_EACH)))
    call = history.entries[3]
    assert isinstance(call, AcquirerCallEntry)
    assert (call.call, call.outcome, call.latency_ms, call.reason) == ("charge", "unknown", 5, "timeout")
    assert call.call == HistoryAcquirerCall.CHARGE and call.outcome == HistoryCallOutcome.UNKNOWN
    settled = history.entries[5]
    assert isinstance(settled, SettledEntry)
    assert (settled.by, settled.key, settled.event_id) == (HistorySettledBy.WEBHOOK, None, "evt_1")
    reserved = history.entries[7]
    assert isinstance(reserved, RefundReservedEntry)
    assert reserved.amount == Amount("5.00", "RUB") and reserved.refund_id == "re_1"
    attempt = history.entries[9]
    assert isinstance(attempt, EventAttemptEntry) and attempt.status == 500
    expired = history.entries[11]
    assert isinstance(expired, KeyExpiredEntry)
    assert (expired.replays.count, expired.replays.last_at, expired.conflicts.last_at) == (2, TALLY["last_at"], None)
    capture = history.entries[15]
    assert isinstance(capture, CaptureReservedEntry)
    assert (capture.capture_id, capture.amount, capture.final) == ("cap_1", Amount("4.00", "RUB"), False)
    released = history.entries[18]
    assert isinstance(released, ReleaseEndedEntry) and (released.reason, released.released) == ("void", True)
    repeats = history.key_repeats("o-pay")
    assert repeats is not None and repeats.replays.count == 2 and repeats.mismatches.count == 0
    assert history.key_repeats("elsewhere") is None


def test_an_unknown_entry_type_stays_readable() -> None:
    future = {"type": "chargeback_opened", "dispute_id": "dp_1", "amount": {"value": "15.00", "currency": "RUB"}}
    history = PaymentHistory.from_json(history_json([ONE_OF_EACH[0], future]))
    entry = history.entries[1]
    assert isinstance(entry, UnknownHistoryEntry)
    assert (entry.type, entry.seq, entry.at, entry.refund_id) == ("chargeback_opened", 1, BASE["at"], None)
    assert entry.raw["dispute_id"] == "dp_1"
    assert entry.raw["amount"] == {"value": "15.00", "currency": "RUB"}


def test_a_known_entry_without_its_members_is_an_error() -> None:
    with pytest.raises(KeyError):
        PaymentHistory.from_json(history_json([{"type": "answered", "key": "o-pay"}]))


# -- against a real server --------------------------------------------------------


@pytest.fixture(scope="module")
def history_server() -> Iterator[Server]:
    """A server that flushes cached repeats often, with a second shop."""
    server = Server(["--repeat-flush-interval", FLUSH], other_shops=[(OTHER_SHOP, OTHER_SECRET)])
    yield server
    server.stop()


def only(history: PaymentHistory, kind: Type[E]) -> List[E]:
    return [e for e in history.entries if isinstance(e, kind)]


def counted(history: PaymentHistory, key: IdempotencyKey) -> bool:
    repeats = history.key_repeats(key.value)
    return repeats is not None and repeats.replays.count >= 1 and repeats.mismatches.count >= 1


def check_history(history: PaymentHistory, payment_id: str, key: IdempotencyKey, refund_id: str) -> None:
    assert history.object == "payment_history"
    assert history.payment_id == payment_id
    seqs = [e.seq for e in history.entries]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs), f"oldest first: {seqs}"

    first = history.entries[0]
    assert isinstance(first, ClaimedEntry), history.entries
    assert first.key == key.value and first.instance and first.refund_id is None

    charges = [e for e in only(history, AcquirerCallEntry) if e.call == HistoryAcquirerCall.CHARGE]
    assert [c.outcome for c in charges] == [HistoryCallOutcome.SUCCEEDED], charges
    assert charges[0].acquirer_key and charges[0].latency_ms >= 0

    answered = [e for e in only(history, AnsweredEntry) if e.key == key.value]
    assert [a.status for a in answered] == [201], answered
    settled = only(history, SettledEntry)
    assert len(settled) == 1, settled
    assert (settled[0].status, settled[0].by, settled[0].key) == ("succeeded", HistorySettledBy.REQUEST, key.value)
    assert first.seq < charges[0].seq < settled[0].seq

    reserved = only(history, RefundReservedEntry)
    assert len(reserved) == 1, reserved
    assert reserved[0].refund_id == refund_id and reserved[0].amount == REFUND
    ended = only(history, RefundEndedEntry)
    assert [(e.refund_id, e.status) for e in ended] == [(refund_id, "succeeded")]
    refund_calls = [e for e in only(history, AcquirerCallEntry) if e.call == HistoryAcquirerCall.REFUND]
    assert [(c.refund_id, c.outcome) for c in refund_calls] == [(refund_id, HistoryCallOutcome.SUCCEEDED)]
    assert not only(history, UnknownHistoryEntry), "every entry of this server is a known type"

    repeats = history.key_repeats(key.value)
    assert repeats is not None, history.keys
    # One replay (the second pay) and one 422 (the changed amount), no 409.
    assert repeats.replays.count == 1 and repeats.replays.last_at is not None
    assert repeats.mismatches.count == 1 and repeats.mismatches.last_at is not None
    assert repeats.conflicts.count == 0 and repeats.conflicts.last_at is None


def assert_not_found(error: ProblemError) -> None:
    assert error.status == 404 and error.code == ProblemCode.NOT_FOUND, error


def test_history_of_a_payment(history_server: Server) -> None:
    ref = f"history-sync-{uuid.uuid4().hex[:8]}"
    key = IdempotencyKey.for_operation(ref, "pay")
    with Client(history_server.url, SHOP, SECRET, POLICY) as client:
        paid = client.pay(key, AMOUNT, ref, "tok_ok")
        assert isinstance(paid.outcome, Paid), paid.outcome
        payment_id = paid.outcome.payment.id
        again = client.pay(key, AMOUNT, ref, "tok_ok")
        assert isinstance(again.outcome, Paid) and again.replayed
        with pytest.raises(KeyReused):
            client.pay(key, CHANGED, ref, "tok_ok")
        refunded = client.refund(payment_id, IdempotencyKey.for_operation(ref, "refund-1"), REFUND)
        assert isinstance(refunded.outcome, Refunded), refunded.outcome

        # The replay and the 422 were answered from the instance's cache: their
        # counts reach the key's row at the next flush. Poll, bounded.
        deadline = time.monotonic() + DEADLINE
        history = client.payment_history(payment_id)
        while not counted(history, key):
            assert time.monotonic() < deadline, f"the repeats were not counted within {DEADLINE}s: {history.keys}"
            time.sleep(0.05)
            history = client.payment_history(payment_id)
        check_history(history, payment_id, key, refunded.outcome.refund.id)

        with pytest.raises(ProblemError) as unknown:
            client.payment_history(UNKNOWN_ID)
        assert_not_found(unknown.value)
        with pytest.raises(ProblemError) as malformed:
            client.payment_history("not-a-payment-id")
        assert_not_found(malformed.value)
    with Client(history_server.url, OTHER_SHOP, OTHER_SECRET, POLICY) as other:
        with pytest.raises(ProblemError) as foreign:
            other.payment_history(payment_id)
        assert_not_found(foreign.value)


async def test_history_of_a_payment_async(history_server: Server) -> None:
    ref = f"history-async-{uuid.uuid4().hex[:8]}"
    key = IdempotencyKey.for_operation(ref, "pay")
    async with AsyncClient(history_server.url, SHOP, SECRET, POLICY) as client:
        paid = await client.pay(key, AMOUNT, ref, "tok_ok")
        assert isinstance(paid.outcome, Paid), paid.outcome
        payment_id = paid.outcome.payment.id
        again = await client.pay(key, AMOUNT, ref, "tok_ok")
        assert isinstance(again.outcome, Paid) and again.replayed
        with pytest.raises(KeyReused):
            await client.pay(key, CHANGED, ref, "tok_ok")
        refunded = await client.refund(payment_id, IdempotencyKey.for_operation(ref, "refund-1"), REFUND)
        assert isinstance(refunded.outcome, Refunded), refunded.outcome

        deadline = time.monotonic() + DEADLINE
        history = await client.payment_history(payment_id)
        while not counted(history, key):
            assert time.monotonic() < deadline, f"the repeats were not counted within {DEADLINE}s: {history.keys}"
            await asyncio.sleep(0.05)
            history = await client.payment_history(payment_id)
        check_history(history, payment_id, key, refunded.outcome.refund.id)

        with pytest.raises(ProblemError) as unknown:
            await client.payment_history(UNKNOWN_ID)
        assert_not_found(unknown.value)
    async with AsyncClient(history_server.url, OTHER_SHOP, OTHER_SECRET, POLICY) as other:
        with pytest.raises(ProblemError) as foreign:
            await other.payment_history(payment_id)
        assert_not_found(foreign.value)
