// `paymentHistory` (`GET /v1/payments/{id}/history`): an unknown entry type
// stays readable (a fake fetch), then against a real `chargeonce serve`: a
// payment, its replay, a 422 with the same key and another amount, and a
// partial refund, read back as the history; another shop's or an unknown
// payment is `not_found`.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import {
  Client,
  IdempotencyKey,
  KeyReusedError,
  ProblemError,
  amount,
  historyEntries,
  historyKey,
  isKnownHistoryEntry,
  type HistoryEntry,
  type PaymentHistory,
} from "../src/index.js";
import { haveBinary, startServer, SECRET, SHOP, type Server } from "./harness.js";

const OTHER_SHOP = "tsshop-other";
const OTHER_SECRET = "sk_ts_other_0123456789abcdef";
/** The server adds cached repeats to their keys' counts this often. */
const FLUSH = "100ms";
/** How long the test waits for the counts to appear (many flushes). */
const DEADLINE_MS = 15_000;
const UNKNOWN_ID = "pay_00000000000000000000000000000000";
const fast = { baseDelayMs: 50, maxDelayMs: 500, budgetMs: 30_000 };

// -- without a server ---------------------------------------------------------

function fakeClient(status: number, body: unknown, contentType = "application/json"): { client: Client; urls: string[] } {
  const urls: string[] = [];
  const client = new Client("http://example.invalid", "demo", "sk", {
    fetch: (async (input: string | URL | Request) => {
      urls.push(String(input));
      return new Response(JSON.stringify(body), { status, headers: { "content-type": contentType } });
    }) as typeof fetch,
    sleep: async () => undefined,
  });
  return { client, urls };
}

test("paymentHistory reads the path; an unknown entry type stays readable, the known ones narrow by type", async () => {
  const wire = {
    object: "payment_history",
    payment_id: "pay_1",
    entries: [
      { seq: 0, at: "2026-12-03T09:52:46.64Z", refund_id: null, type: "claimed", key: "o-pay", instance: "i1" },
      { seq: 16, at: "2026-12-03T09:52:46.65Z", refund_id: null, type: "chargeback_opened", dispute_id: "dp_1" },
      {
        seq: 17,
        at: "2026-12-03T09:52:47Z",
        refund_id: "re_1",
        type: "refund_reserved",
        key: "o-refund-1",
        amount: { value: "5.00", currency: "RUB" },
        instance: "i1",
      },
    ],
    keys: [{ key: "o-pay", replays: { count: 2, last_at: "2026-12-03T09:52:48Z" }, conflicts: { count: 0, last_at: null }, mismatches: { count: 0, last_at: null } }],
  };
  const { client, urls } = fakeClient(200, wire);
  const history = await client.paymentHistory("pay_1/x");
  assert.deepEqual(urls, ["http://example.invalid/v1/payments/pay_1%2Fx/history"]);
  assert.equal(history.entries.length, 3);
  const [claimed, future, reserved] = history.entries as [HistoryEntry, HistoryEntry, HistoryEntry];
  assert.ok(isKnownHistoryEntry(claimed) && claimed.type === "claimed");
  assert.equal(claimed.key, "o-pay");
  assert.ok(!isKnownHistoryEntry(future), "a type this client does not know");
  assert.equal(future.type, "chargeback_opened");
  assert.equal(future.seq, 16);
  assert.equal(future["dispute_id"], "dp_1");
  assert.ok(isKnownHistoryEntry(reserved) && reserved.type === "refund_reserved");
  assert.deepEqual(reserved.amount, { value: "5.00", currency: "RUB" }, "a decimal string, never a number");
  assert.deepEqual(historyEntries(history, "refund_reserved"), [reserved]);
  assert.deepEqual(historyEntries(history, "settled"), []);
  assert.equal(historyKey(history, "o-pay")?.replays.count, 2);
  assert.equal(historyKey(history, "elsewhere"), undefined);
});

test("paymentHistory: a 404 problem is a ProblemError not_found", async () => {
  const problem = { type: "urn:chargeonce:problem:not_found", title: "Not found", status: 404, detail: "no such payment for this shop", code: "not_found" };
  const { client } = fakeClient(404, problem, "application/problem+json");
  await assert.rejects(client.paymentHistory("pay_1"), (e: unknown) => e instanceof ProblemError && e.code === "not_found" && e.status === 404);
});

// -- against a real server ------------------------------------------------------

let server: Server | null = null;

before(async () => {
  if (haveBinary()) server = await startServer(["--repeat-flush-interval", FLUSH], undefined, [{ shop: OTHER_SHOP, secret: OTHER_SECRET }]);
});
after(async () => {
  await server?.stop();
});

function isNotFound(error: unknown): boolean {
  return error instanceof ProblemError && error.code === "not_found" && error.status === 404;
}

function counted(history: PaymentHistory, key: string): boolean {
  const repeats = historyKey(history, key);
  return repeats !== undefined && repeats.replays.count >= 1 && repeats.mismatches.count >= 1;
}

test("a payment's history: claimed, the charge, answered, settled, the refund, and the key's replay and 422", { timeout: 60_000 }, async (t) => {
  if (server === null) {
    t.skip("no chargeonce binary (set CHARGEONCE_BIN)");
    return;
  }
  const reference = `history-ts-${randomBytes(4).toString("hex")}`;
  const key = IdempotencyKey.forOperation(reference, "pay");
  const client = new Client(server.url, SHOP, SECRET, { retry: fast });
  const request = { amount: amount("15.00", "RUB"), reference, token: "tok_ok" };

  const paid = await client.pay(key, request);
  assert.ok(paid.outcome.kind === "paid", JSON.stringify(paid.outcome));
  const paymentId = paid.outcome.payment.id;
  const again = await client.pay(key, request);
  assert.equal(again.outcome.kind, "paid");
  assert.equal(again.replayed, true, "the same key and body: the stored answer, replayed");
  await assert.rejects(client.pay(key, { ...request, amount: amount("16.00", "RUB") }), KeyReusedError);
  const refunded = await client.refund(paymentId, IdempotencyKey.forOperation(reference, "refund-1"), { amount: amount("5.00", "RUB") });
  assert.ok(refunded.outcome.kind === "refunded", JSON.stringify(refunded.outcome));
  const refundId = refunded.outcome.refund.id;

  // The replay and the 422 were answered from the instance's cache: their
  // counts reach the key's row at the next flush. Poll, bounded.
  const deadline = Date.now() + DEADLINE_MS;
  let history = await client.paymentHistory(paymentId);
  while (!counted(history, key.value)) {
    assert.ok(Date.now() < deadline, `the repeats were not counted within ${DEADLINE_MS} ms: ${JSON.stringify(history.keys)}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
    history = await client.paymentHistory(paymentId);
  }

  assert.equal(history.object, "payment_history");
  assert.equal(history.payment_id, paymentId);
  const seqs = history.entries.map((e) => e.seq);
  assert.deepEqual(seqs, [...seqs].sort((a, b) => a - b), "oldest first");
  assert.equal(new Set(seqs).size, seqs.length);
  assert.ok(history.entries.every(isKnownHistoryEntry), `every entry of this server is a known type: ${JSON.stringify(history.entries)}`);

  const first = history.entries[0];
  assert.ok(first !== undefined && isKnownHistoryEntry(first) && first.type === "claimed", JSON.stringify(first));
  assert.equal(first.key, key.value);
  assert.ok(first.instance.length > 0);
  assert.equal(first.refund_id, null);

  const charges = historyEntries(history, "acquirer_call").filter((e) => e.call === "charge");
  assert.deepEqual(charges.map((c) => c.outcome), ["succeeded"]);
  const charge = charges[0]!;
  assert.ok(charge.acquirer_key.length > 0 && charge.latency_ms >= 0);
  const answered = historyEntries(history, "answered").filter((e) => e.key === key.value);
  assert.deepEqual(answered.map((a) => a.status), [201]);
  const settled = historyEntries(history, "settled");
  assert.equal(settled.length, 1, JSON.stringify(settled));
  assert.deepEqual([settled[0]!.status, settled[0]!.by, settled[0]!.key], ["succeeded", "request", key.value]);
  assert.ok(first.seq < charge.seq && charge.seq < settled[0]!.seq);

  const reserved = historyEntries(history, "refund_reserved");
  assert.equal(reserved.length, 1, JSON.stringify(reserved));
  assert.equal(reserved[0]!.refund_id, refundId);
  assert.deepEqual(reserved[0]!.amount, { value: "5.00", currency: "RUB" });
  assert.deepEqual(historyEntries(history, "refund_ended").map((e) => [e.refund_id, e.status]), [[refundId, "succeeded"]]);
  const refundCalls = historyEntries(history, "acquirer_call").filter((e) => e.call === "refund");
  assert.deepEqual(refundCalls.map((c) => [c.refund_id, c.outcome]), [[refundId, "succeeded"]]);

  // One replay (the second pay) and one 422 (the changed amount), no 409.
  const repeats = historyKey(history, key.value)!;
  assert.equal(repeats.replays.count, 1);
  assert.equal(typeof repeats.replays.last_at, "string");
  assert.equal(repeats.mismatches.count, 1);
  assert.equal(typeof repeats.mismatches.last_at, "string");
  assert.equal(repeats.conflicts.count, 0);
  assert.equal(repeats.conflicts.last_at, null);

  await assert.rejects(client.paymentHistory(UNKNOWN_ID), isNotFound);
  await assert.rejects(client.paymentHistory("not-a-payment-id"), isNotFound);
  const other = new Client(server.url, OTHER_SHOP, OTHER_SECRET, { retry: fast });
  await assert.rejects(other.paymentHistory(paymentId), isNotFound, "another shop's payment is not found");
});
