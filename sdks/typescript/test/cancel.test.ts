// Cancel: how its answers are judged, the retry loop of `client.cancel` with a
// fake fetch (202s retried with the same key and bytes after Retry-After,
// uncertain at the end of the budget or the signal, `payment_not_cancelable`
// its own error), the `canceled` outcome of `pay` and `payOrder`; then against
// a real `chargeonce serve`: a payment whose charge is still in flight is
// canceled, its key answers `canceled`, and the order is paid again under a
// new key.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import {
  Client,
  IdempotencyKey,
  KeyReusedError,
  PaymentNotCancelableError,
  ProblemError,
  amount,
  asPayment,
  historyEntries,
  judgeCancel,
  judgePayment,
  type Answer,
} from "../src/index.js";
import { haveBinary, startServer, SECRET, SHOP, type Server } from "./harness.js";

const payment = (status: string, extra: Record<string, unknown> = {}) => ({
  id: "pay_1",
  object: "payment",
  shop_id: "demo",
  status,
  amount: { value: "1500.00", currency: "RUB" },
  reference: "order-123",
  provider_payment_id: null,
  decline_code: status === "declined" ? "card_declined" : null,
  created_at: "2026-11-29T22:42:32.243Z",
  amount_refunded: { value: "0.00", currency: "RUB" },
  refund_status: "none",
  ...extra,
});
const refunded = () => payment("succeeded", { amount_refunded: { value: "1500.00", currency: "RUB" }, refund_status: "refunded" });
const problem = (status: number, code: string, extra: Record<string, unknown> = {}) => ({
  type: `urn:chargeonce:problem:${code}`,
  title: "T",
  status,
  detail: "D",
  code,
  ...extra,
});
const answer = (status: number, body: unknown, headers: Record<string, string> = {}): Answer => ({
  status,
  headers: { "content-type": status >= 400 ? "application/problem+json" : "application/json", ...headers },
  body: JSON.stringify(body),
});
const response = (status: number, body: unknown, headers: Record<string, string> = {}): Response =>
  new Response(JSON.stringify(body), {
    status,
    headers: { "content-type": status >= 400 ? "application/problem+json" : "application/json", ...headers },
  });

interface Sent {
  method: string;
  url: string;
  key: string | null;
  body: string;
  prefer: string | null;
}

/** A client whose fetch answers from `answers` in turn, on a fake clock; records what was sent and the waits. */
function fakeClient(answers: Array<() => Response>, retry: Record<string, number> = {}) {
  const sent: Sent[] = [];
  const sleeps: number[] = [];
  let clock = 0;
  const client = new Client("http://example.invalid", "demo", "sk", {
    retry,
    fetch: (async (input: string | URL | Request, init?: RequestInit) => {
      const headers = new Headers(init?.headers);
      sent.push({
        method: init?.method ?? "GET",
        url: String(input),
        key: headers.get("idempotency-key"),
        body: String(init?.body ?? ""),
        prefer: headers.get("prefer"),
      });
      const next = answers.shift();
      assert.ok(next, `an unexpected request: ${String(input)}`);
      return next();
    }) as typeof fetch,
    now: () => clock,
    sleep: async (ms) => {
      sleeps.push(ms);
      clock += ms;
    },
    random: () => 0.5,
  });
  return { client, sent, sleeps };
}

test("cancel answers: 200 ends by the payment, 202 and a pending 200 are asked again", () => {
  for (const [body, kind] of [
    [payment("canceled"), "canceled"],
    [payment("declined"), "declined"],
    [refunded(), "refunded"],
    // Found, but its refund refused: the customer holds the charge.
    [payment("succeeded"), "charged"],
  ] as const) {
    const judged = judgeCancel(answer(200, body, { "idempotent-replayed": "true" }), 2);
    assert.ok(judged.step.kind === "done" && judged.step.outcome.kind === kind, kind);
    assert.ok(judged.step.kind === "done" && "payment" in judged.step.outcome && judged.step.outcome.payment.id === "pay_1");
    assert.equal(judged.namedId, "pay_1");
    assert.ok(judged.seen.kind === "http" && judged.seen.replayed && judged.seen.paymentStatus === body.status);
  }
  // 202: the payment still pending, or found and its refund still pending.
  for (const body of [payment("pending"), payment("succeeded"), refunded()]) {
    const judged = judgeCancel(answer(202, body, { "retry-after": "1" }), 1, 0);
    assert.deepEqual(judged.step, { kind: "retry", retryAfterMs: 1000 });
    assert.equal(judged.namedId, "pay_1");
  }
  assert.deepEqual(judgeCancel(answer(202, payment("pending")), 1, 0).step, { kind: "retry", retryAfterMs: null });
  // A 200 that still says pending, or a mangled body: not an end.
  assert.equal(judgeCancel(answer(200, payment("pending")), 1).step.kind, "retry");
  assert.equal(judgeCancel({ status: 200, headers: { "content-type": "application/json" }, body: "{\"id\":" }, 1).step.kind, "retry");
  // Transient answers are retried as for every keyed POST.
  for (const [status, code] of [
    [409, "request_in_progress"],
    [503, "store_unavailable"],
    [429, "rate_limited"],
  ] as const) {
    assert.deepEqual(judgeCancel(answer(status, problem(status, code), { "retry-after": "2" }), 1, 0).step, {
      kind: "retry",
      retryAfterMs: 2000,
    });
  }
});

test("cancel refusals: payment_not_cancelable carries the payment; not_found and key reuse are errors", () => {
  const refused = judgeCancel(answer(409, problem(409, "payment_not_cancelable", { payment: payment("succeeded") })), 1);
  assert.ok(refused.step.kind === "fail");
  const error = refused.step.error;
  assert.ok(error instanceof PaymentNotCancelableError && error instanceof ProblemError);
  assert.equal(error.code, "payment_not_cancelable");
  assert.equal(error.status, 409);
  assert.equal(error.payment?.status, "succeeded");
  assert.equal(error.attempts, 1);
  assert.match(error.message, /refund it instead/);
  assert.equal(refused.namedId, "pay_1");
  // Without the payment (not the contract, but never a crash): still its own error.
  const bare = judgeCancel(answer(409, problem(409, "payment_not_cancelable")), 1);
  assert.ok(bare.step.kind === "fail" && bare.step.error instanceof PaymentNotCancelableError && bare.step.error.payment === null);

  const missing = judgeCancel(answer(404, problem(404, "not_found")), 1);
  assert.ok(missing.step.kind === "fail" && missing.step.error instanceof ProblemError && missing.step.error.code === "not_found");
  assert.ok(!(missing.step.kind === "fail" && missing.step.error instanceof PaymentNotCancelableError));
  const reused = judgeCancel(answer(422, problem(422, "idempotency_key_reused")), 1);
  assert.ok(reused.step.kind === "fail" && reused.step.error instanceof KeyReusedError);
  const invalid = judgeCancel(answer(422, problem(422, "invalid_request")), 1);
  assert.ok(invalid.step.kind === "fail" && invalid.step.error instanceof ProblemError && invalid.step.error.code === "invalid_request");
});

test("a canceled payment is read as a payment, and pay's 409 payment_canceled is the canceled outcome", () => {
  assert.equal(asPayment(payment("canceled"))?.status, "canceled");
  assert.equal(asPayment(payment("chargeback_lost")), null, "a status this client does not know is not a payment");
  const judged = judgePayment(answer(409, problem(409, "payment_canceled", { payment: payment("canceled") }), { "idempotent-replayed": "true" }), 1);
  assert.ok(judged.step.kind === "done" && judged.step.outcome.kind === "canceled");
  assert.ok(judged.seen.kind === "http" && judged.seen.problem === "payment_canceled" && judged.seen.paymentStatus === "canceled");
  // Without the payment it cannot be told apart from anything else: never "paid", never retried for ever.
  const bare = judgePayment(answer(409, problem(409, "payment_canceled")), 1);
  assert.equal(bare.step.kind, "fail");
});

test("client.cancel retries 202s with the same key and body after Retry-After, until the cancel ends", async () => {
  const { client, sent, sleeps } = fakeClient([
    () => response(202, payment("pending"), { "retry-after": "1" }),
    () => {
      throw Object.assign(new TypeError("fetch failed"), { cause: { code: "UND_ERR_SOCKET", message: "other side closed" } });
    },
    () => response(202, payment("pending"), { "retry-after": "2" }),
    () => response(200, refunded(), { "idempotent-replayed": "true" }),
  ]);
  const key = IdempotencyKey.forOperation("order-123", "cancel");
  const result = await client.cancel("pay_1", key);
  assert.equal(result.outcome.kind, "refunded");
  assert.ok(result.outcome.kind === "refunded" && result.outcome.payment.amount_refunded.value === "1500.00");
  assert.equal(result.key, "order-123-cancel");
  assert.deepEqual(
    result.attempts.map((a) => (a.answer.kind === "http" ? a.answer.status : a.answer.failure)),
    [202, "lost", 202, 200],
  );
  assert.equal(sent.length, 4);
  for (const s of sent) {
    assert.equal(s.method, "POST");
    assert.equal(s.url, "http://example.invalid/v1/payments/pay_1/cancel");
    assert.equal(s.key, "order-123-cancel");
    assert.equal(s.body, "{}");
    assert.equal(s.prefer, null, "like refund: no Prefer");
  }
  assert.ok(sleeps[0]! >= 1000 && sleeps[2]! >= 2000, `Retry-After honoured: ${JSON.stringify(sleeps)}`);
  assert.equal(result.attempts[3]!.retryInMs, null);
});

test("client.cancel: uncertain at the end of the budget or when its signal aborts, never an error", async () => {
  const pending = () => response(202, payment("pending"), { "retry-after": "1" });
  const budget = fakeClient(Array.from({ length: 10 }, () => pending), { budgetMs: 2500 });
  const ran = await budget.client.cancel("pay_1", "order-123-cancel");
  assert.deepEqual(ran.outcome, { kind: "uncertain", paymentId: "pay_1" });
  assert.ok(ran.attempts.length >= 2 && ran.attempts.length <= 3, `${ran.attempts.length} attempts`);

  // Aborted before it starts: nothing sent, uncertain.
  const aborted = fakeClient([]);
  const none = await aborted.client.cancel("pay_1", "order-123-cancel", { signal: AbortSignal.abort() });
  assert.deepEqual(none.outcome, { kind: "uncertain" });
  assert.equal(aborted.sent.length, 0);

  // Aborted while waiting for the next attempt: uncertain with the payment an answer named.
  const controller = new AbortController();
  const waiting = fakeClient([
    () => {
      controller.abort();
      return pending();
    },
  ]);
  const stopped = await waiting.client.cancel("pay_1", "order-123-cancel", { signal: controller.signal });
  assert.deepEqual(stopped.outcome, { kind: "uncertain", paymentId: "pay_1" });
  assert.equal(waiting.sent.length, 1);
});

test("client.cancel throws PaymentNotCancelableError for a payment already final, after one attempt", async () => {
  const { client, sent } = fakeClient([() => response(409, problem(409, "payment_not_cancelable", { payment: payment("declined") }))]);
  await assert.rejects(client.cancel("pay_1", "order-123-cancel"), (error: unknown) => {
    assert.ok(error instanceof PaymentNotCancelableError);
    assert.equal(error.payment?.status, "declined");
    assert.equal(error.attempts, 1);
    assert.doesNotMatch(error.message, /refund it instead/);
    return true;
  });
  assert.equal(sent.length, 1);
});

test("pay: a canceled payment's key answers the canceled outcome, never paid, never an error", async () => {
  const { client, sent } = fakeClient([
    () => response(409, problem(409, "payment_canceled", { payment: payment("canceled") }), { "idempotent-replayed": "true" }),
  ]);
  const request = { amount: amount("1500.00", "RUB"), reference: "order-123", token: "tok_ok" };
  const result = await client.pay(IdempotencyKey.forOperation("order-123", "pay"), request);
  assert.equal(result.outcome.kind, "canceled");
  assert.ok(result.outcome.kind === "canceled" && result.outcome.payment.status === "canceled");
  assert.equal(result.replayed, true);
  assert.equal(result.attempts.length, 1);
  assert.equal(sent.length, 1);
});

test("payOrder: a canceled payment does not make the order paid; a succeeded one after it does", async () => {
  const request = { amount: amount("1500.00", "RUB"), reference: "order-123", token: "tok_ok" };
  const list = (...data: unknown[]) => () => response(200, { object: "list", data, has_more: false });

  // Only a canceled payment: the order is free, so the payment is sent; the old key answers canceled.
  const again = fakeClient([
    list(payment("canceled")),
    () => response(409, problem(409, "payment_canceled", { payment: payment("canceled") }), { "idempotent-replayed": "true" }),
  ]);
  const oldKey = await again.client.payOrder(IdempotencyKey.forOperation("order-123", "pay"), request);
  assert.equal(oldKey.outcome.kind, "canceled");
  assert.equal(oldKey.foundBeforePaying, false);
  assert.deepEqual(again.sent.map((s) => s.method), ["GET", "POST"]);

  // A new key pays the order anew.
  const newer = { ...payment("succeeded"), id: "pay_2" };
  const fresh = fakeClient([list(payment("canceled")), () => response(201, newer)]);
  const paid = await fresh.client.payOrder(IdempotencyKey.forOperation("order-123", "pay-2"), request);
  assert.ok(paid.outcome.kind === "paid" && paid.outcome.payment.id === "pay_2");
  assert.equal(paid.foundBeforePaying, false);

  // The order's list (newest first) holds the new succeeded payment and the canceled one: found, nothing sent.
  const found = fakeClient([list(newer, payment("canceled"))]);
  const known = await found.client.payOrder(IdempotencyKey.forOperation("order-123", "pay-3"), request);
  assert.ok(known.outcome.kind === "paid" && known.outcome.payment.id === "pay_2");
  assert.equal(known.foundBeforePaying, true);
  assert.deepEqual(found.sent.map((s) => s.method), ["GET"]);
});

// -- against a real server ------------------------------------------------------

// The acquirer gives up on a charge after 100 ms (202 pending) and looks it up
// 300 ms after; `tok_late` records it only after `--sim-slow` (2 s): the
// cancel's look-up (its retry, after `Retry-After: 1`) finds nothing, and the
// payment is canceled. The payment is sent once: a retry of it would send the
// charge again and push the look-up past the late charge.
const ARGS = ["--acquirer-timeout", "100ms", "--acquirer-settle-window", "300ms"];
let server: Server | null = null;
before(async () => {
  if (haveBinary()) server = await startServer(ARGS);
});
after(async () => {
  await server?.stop();
});

test("a payment whose charge is in flight is canceled; its key answers canceled; a new key pays the order", { timeout: 60_000 }, async (t) => {
  if (server === null) {
    t.skip("no chargeonce binary (set CHARGEONCE_BIN)");
    return;
  }
  const client = new Client(server.url, SHOP, SECRET, { retry: { maxAttempts: 1 } });
  const reference = `C-ts-cancel-${randomBytes(3).toString("hex")}`;
  const request = { amount: amount("12.00", "RUB"), reference, token: "tok_late" };
  const payKey = IdempotencyKey.forOperation(reference, "pay");
  const first = await client.pay(payKey, request);
  assert.equal(first.outcome.kind, "uncertain", "the charge is still in flight");
  assert.ok(first.outcome.kind === "uncertain" && first.outcome.paymentId !== undefined);
  const paymentId = first.outcome.paymentId!;

  const canceler = new Client(server.url, SHOP, SECRET, { retry: { budgetMs: 20_000, baseDelayMs: 50, maxDelayMs: 200 } });
  const cancelKey = IdempotencyKey.forOperation(reference, "cancel");
  const canceled = await canceler.cancel(paymentId, cancelKey);
  assert.equal(canceled.outcome.kind, "canceled", JSON.stringify(canceled.attempts.map((a) => a.answer)));
  assert.ok(canceled.outcome.kind === "canceled" && canceled.outcome.payment.id === paymentId);
  assert.equal(canceled.outcome.payment.status, "canceled");
  // The cancel key replays its answer; another key ends at once with the same payment.
  const replay = await canceler.cancel(paymentId, cancelKey);
  assert.equal(replay.outcome.kind, "canceled");
  assert.equal(replay.attempts.length, 1);
  assert.ok(replay.attempts[0]!.answer.kind === "http" && replay.attempts[0]!.answer.replayed);
  const other = await canceler.cancel(paymentId, IdempotencyKey.forOperation(reference, "cancel-again"));
  assert.ok(other.outcome.kind === "canceled" && other.outcome.payment.id === paymentId);

  // The payment's own key: canceled, nothing taken; through payOrder too (the canceled payment is not the order's).
  const again = await canceler.pay(payKey, request);
  assert.ok(again.outcome.kind === "canceled" && again.outcome.payment.id === paymentId, JSON.stringify(again.outcome));
  const viaOrder = await canceler.payOrder(payKey, request);
  assert.equal(viaOrder.outcome.kind, "canceled");
  assert.equal(viaOrder.foundBeforePaying, false);

  // The history has the cancel, under its key (the first cancel's: the others found it canceled).
  const history = await canceler.paymentHistory(paymentId);
  const requested = historyEntries(history, "cancel_requested");
  assert.ok(requested.length >= 1, JSON.stringify(history.entries));
  for (const entry of requested) {
    assert.equal(entry.key, cancelKey.value);
    assert.equal(typeof entry.instance, "string");
  }
  const settled = historyEntries(history, "settled");
  assert.deepEqual(settled.map((e) => e.status), ["canceled"]);
  const listed = await canceler.listPayments({ reference, status: "canceled" });
  assert.deepEqual(listed.data.map((p) => p.id), [paymentId]);

  // The order is free: a new key pays it, and then it is found paid.
  const repaid = await canceler.payOrder(IdempotencyKey.forOperation(reference, "pay-2"), { ...request, token: "tok_ok" });
  assert.equal(repaid.outcome.kind, "paid");
  assert.ok(repaid.outcome.kind === "paid" && repaid.outcome.payment.id !== paymentId);
  const found = await canceler.payOrder(IdempotencyKey.forOperation(reference, "pay-3"), { ...request, token: "tok_ok" });
  assert.equal(found.foundBeforePaying, true);

  // A final payment is not cancelable: its own error, carrying it, stored.
  const paidId = repaid.outcome.kind === "paid" ? repaid.outcome.payment.id : "";
  const refusedKey = IdempotencyKey.forOperation(reference, "cancel-paid");
  for (let i = 0; i < 2; i++) {
    await assert.rejects(canceler.cancel(paidId, refusedKey), (error: unknown) => {
      assert.ok(error instanceof PaymentNotCancelableError, String(error));
      assert.equal(error.payment?.id, paidId);
      assert.equal(error.payment?.status, "succeeded");
      return true;
    });
  }
  await assert.rejects(canceler.cancel("pay_00000000000000000000000000000000", IdempotencyKey.forOperation(reference, "cancel-none")), (error: unknown) =>
    error instanceof ProblemError && error.code === "not_found",
  );
});
