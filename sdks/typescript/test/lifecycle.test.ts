// Authorize, capture in parts, void: how their answers are judged, the retry
// loops of `client.capture` and `client.void` with a fake fetch (202, 409 and
// 503 retried with the same key and bytes, `authorization_busy` to the end of
// the budget refused, a refusal after a lost answer uncertain); then against a
// real `chargeonce serve`: two shipments captured under their own keys and
// refunded in part, a capture replayed, one refused for more than is
// capturable, a void of an untouched authorization, `tok_timeout` resolved by
// the client's own retries, and lost capture answers retried with the same bytes.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import {
  Client,
  IdempotencyKey,
  KeyReusedError,
  amount,
  captureBody,
  judgeCapture,
  judgePayment,
  judgeVoid,
  paymentBody,
  type Answer,
  type Attempt,
  type Capture,
} from "../src/index.js";
import { checkSameBytesPerKey, haveBinary, startProxy, startServer, SECRET, SHOP, type Server } from "./harness.js";

const payment = (status: string, extra: Record<string, unknown> = {}) => ({
  id: "pay_1",
  object: "payment",
  shop_id: "demo",
  status,
  amount: { value: "1500.00", currency: "RUB" },
  reference: "order-123",
  provider_payment_id: "ch_1",
  decline_code: null,
  created_at: "2026-12-05T00:00:00.000Z",
  amount_refunded: { value: "0.00", currency: "RUB" },
  refund_status: "none",
  metadata: {},
  capture_method: "manual",
  amount_capturable: { value: "1500.00", currency: "RUB" },
  amount_captured: { value: "0.00", currency: "RUB" },
  authorization_expires_at: "2026-12-12T00:00:00.000Z",
  ...extra,
});
const capture = (status: string, extra: Record<string, unknown> = {}) => ({
  id: "cap_1",
  object: "capture",
  payment_id: "pay_1",
  shop_id: "demo",
  status,
  amount: { value: "1000.00", currency: "RUB" },
  final: false,
  provider_capture_id: null,
  failure_code: null,
  created_at: "2026-12-05T00:00:01.000Z",
  ...extra,
});
const problem = (status: number, code: string, extra: Record<string, unknown> = {}) => ({
  type: `urn:chargeonce:problem:${code}`,
  title: "T",
  status,
  detail: "D",
  code,
  ...extra,
});
const contentType = (status: number) => (status >= 400 ? "application/problem+json" : "application/json");
const answer = (status: number, body: unknown, headers: Record<string, string> = {}): Answer => ({
  status,
  headers: { "content-type": contentType(status), ...headers },
  body: JSON.stringify(body),
});
const response = (status: number, body: unknown, headers: Record<string, string> = {}): Response =>
  new Response(JSON.stringify(body), { status, headers: { "content-type": contentType(status), ...headers } });

interface Sent {
  method: string;
  url: string;
  key: string | null;
  body: string;
  prefer: string | null;
}

/** A client whose fetch answers from `answers` in turn, on a fake clock. */
function fakeClient(answers: Array<() => Response>, retry: Record<string, number> = {}) {
  const sent: Sent[] = [];
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
      clock += Math.max(ms, 1);
    },
    random: () => 0,
  });
  return { client, sent };
}

test("an authorization is its own pay outcome, never paid", () => {
  for (const status of ["authorized", "partially_captured"]) {
    const judged = judgePayment(answer(201, payment(status)), 1);
    assert.ok(judged.step.kind === "done" && judged.step.outcome.kind === "authorized", status);
    assert.equal(judged.namedId, "pay_1");
  }
  assert.equal(judgePayment(answer(202, payment("pending"), { "retry-after": "1" }), 1, 0).step.kind, "retry");
  const paid = judgePayment(answer(201, payment("succeeded")), 1).step;
  assert.ok(paid.kind === "done" && paid.outcome.kind === "paid");
});

test("the bodies carry only what was given", () => {
  const request = { amount: amount("15.00", "RUB"), reference: "o", token: "tok_ok" };
  assert.ok(!paymentBody(request).includes("capture_method"));
  assert.ok(paymentBody({ ...request, captureMethod: "manual" }).endsWith(`,"capture_method":"manual"}`));
  assert.equal(captureBody({}), "{}");
  assert.equal(captureBody({ amount: amount("1000.00", "RUB") }), `{"amount":{"value":"1000.00","currency":"RUB"}}`);
  assert.equal(captureBody({ amount: amount("500.00", "RUB"), final: true }), `{"amount":{"value":"500.00","currency":"RUB"},"final":true}`);
});

test("capture answers: captured, pending asked again, failed stored, refusals, retried problems", () => {
  const done = judgeCapture(answer(201, capture("succeeded")), 1);
  assert.ok(done.step.kind === "done" && done.step.outcome.kind === "captured" && done.namedId === "cap_1");
  const pending = judgeCapture(answer(202, capture("pending"), { "retry-after": "1" }), 1, 0);
  assert.deepEqual(pending.step, { kind: "retry", retryAfterMs: 1000 });
  assert.equal(pending.namedId, "cap_1");
  const failed = judgeCapture(answer(422, problem(422, "capture_failed", { capture: capture("failed", { failure_code: "x" }) })), 1);
  assert.ok(failed.step.kind === "done" && failed.step.outcome.kind === "failed" && failed.step.outcome.capture.failure_code === "x");
  for (const [status, code] of [
    [422, "capture_exceeds_capturable"],
    [409, "payment_not_capturable"],
    [422, "currency_mismatch"],
    [404, "not_found"],
  ] as const) {
    const refused = judgeCapture(answer(status, problem(status, code)), 1);
    assert.ok(refused.step.kind === "done" && refused.step.refusal === true, code);
    assert.ok(refused.step.kind === "done" && refused.step.outcome.kind === "refused" && refused.step.outcome.code === code);
    assert.ok(refused.step.kind === "done" && refused.step.outcome.kind === "refused" && refused.step.outcome.status === status);
  }
  const busy = judgeCapture(answer(409, problem(409, "authorization_busy"), { "retry-after": "1" }), 1, 0);
  assert.ok(busy.step.kind === "retry" && busy.step.refused?.kind === "refused" && busy.step.retryAfterMs === 1000);
  for (const [status, code] of [
    [409, "request_in_progress"],
    [503, "acquirer_unavailable"],
    [503, "store_unavailable"],
  ] as const) {
    const retried = judgeCapture(answer(status, problem(status, code, { capture: capture("pending") })), 1);
    assert.ok(retried.step.kind === "retry" && retried.step.refused === undefined, code);
  }
  const reused = judgeCapture(answer(422, problem(422, "idempotency_key_reused")), 1);
  assert.ok(reused.step.kind === "fail" && reused.step.error instanceof KeyReusedError);
});

test("void answers: voided, released, in flight, failed, refused", () => {
  const voided = judgeVoid(answer(200, payment("voided")), 1).step;
  assert.ok(voided.kind === "done" && voided.outcome.kind === "voided");
  const released = judgeVoid(answer(200, payment("succeeded", { amount_captured: { value: "1000.00", currency: "RUB" } })), 1).step;
  assert.ok(released.kind === "done" && released.outcome.kind === "released");
  assert.equal(judgeVoid(answer(202, payment("partially_captured"), { "retry-after": "1" }), 1, 0).step.kind, "retry");
  const failed = judgeVoid(answer(422, problem(422, "void_failed", { payment: payment("authorized"), failure_code: "x" })), 1).step;
  assert.ok(failed.kind === "done" && failed.outcome.kind === "failed" && failed.outcome.failureCode === "x");
  const refused = judgeVoid(answer(409, problem(409, "payment_not_voidable", { payment_status: "succeeded" })), 1).step;
  assert.ok(refused.kind === "done" && refused.outcome.kind === "refused" && refused.outcome.problem.raw["payment_status"] === "succeeded");
  assert.equal(judgeVoid(answer(409, problem(409, "authorization_busy")), 1).step.kind, "retry");
});

test("client.capture retries 202, 409 and 503 with the same key and bytes until it ends", async () => {
  const { client, sent } = fakeClient([
    () => response(202, capture("pending"), { "retry-after": "0" }),
    () => response(409, problem(409, "request_in_progress")),
    () => response(503, problem(503, "acquirer_unavailable", { capture: capture("pending") })),
    () => response(201, capture("succeeded", { provider_capture_id: "cp_1" }), { "idempotent-replayed": "true" }),
  ]);
  const key = IdempotencyKey.forOperation("order-123", "capture-1");
  const result = await client.capture("pay_1", key, { amount: amount("1000.00", "RUB") });
  assert.ok(result.outcome.kind === "captured" && result.outcome.capture.provider_capture_id === "cp_1");
  assert.equal(result.key, "order-123-capture-1");
  assert.equal(result.replayed, true);
  assert.deepEqual(result.attempts.map((a) => (a.answer.kind === "http" ? a.answer.status : a.answer.failure)), [202, 409, 503, 201]);
  for (const s of sent) {
    assert.equal(s.url, "http://example.invalid/v1/payments/pay_1/captures");
    assert.equal(s.key, "order-123-capture-1");
    assert.equal(s.body, `{"amount":{"value":"1000.00","currency":"RUB"}}`);
    assert.equal(s.prefer, null);
  }
});

test("client.capture: pending past the budget is uncertain; busy to the end is refused; a refusal after a lost answer is uncertain", async () => {
  const pending = fakeClient(Array.from({ length: 10 }, () => () => response(202, capture("pending"), { "retry-after": "1" })), { budgetMs: 2500 });
  assert.deepEqual((await pending.client.capture("pay_1", "o-capture-1", { amount: amount("1.00", "RUB") })).outcome, {
    kind: "uncertain",
    captureId: "cap_1",
  });
  const busy = fakeClient(Array.from({ length: 10 }, () => () => response(409, problem(409, "authorization_busy"), { "retry-after": "1" })), {
    budgetMs: 2500,
  });
  const refused = await busy.client.capture("pay_1", "o-capture-1");
  assert.ok(refused.outcome.kind === "refused" && refused.outcome.code === "authorization_busy", JSON.stringify(refused.outcome));
  assert.ok(refused.attempts.length >= 2);
  const lost = fakeClient([
    () => {
      throw Object.assign(new TypeError("fetch failed"), { cause: { code: "UND_ERR_SOCKET", message: "other side closed" } });
    },
    () => response(422, problem(422, "capture_exceeds_capturable")),
  ]);
  assert.deepEqual((await lost.client.capture("pay_1", "o-capture-1")).outcome, { kind: "uncertain" });
  const lostThenBusy = fakeClient([
    () => {
      throw Object.assign(new TypeError("fetch failed"), { cause: { code: "UND_ERR_SOCKET", message: "other side closed" } });
    },
    ...Array.from({ length: 10 }, () => () => response(409, problem(409, "authorization_busy"), { "retry-after": "1" })),
  ], { budgetMs: 2500 });
  assert.deepEqual((await lostThenBusy.client.capture("pay_1", "o-capture-1")).outcome, { kind: "uncertain" });
  // Aborted before it starts: nothing sent, uncertain.
  const aborted = fakeClient([]);
  assert.deepEqual((await aborted.client.capture("pay_1", "o-capture-1", {}, { signal: AbortSignal.abort() })).outcome, { kind: "uncertain" });
});

test("client.void retries busy and 202 with the same key until it ends; a refusal is one attempt", async () => {
  const { client, sent } = fakeClient([
    () => response(409, problem(409, "authorization_busy"), { "retry-after": "0" }),
    () => response(202, payment("partially_captured"), { "retry-after": "0" }),
    () => response(200, payment("succeeded", { amount_captured: { value: "1000.00", currency: "RUB" } })),
  ]);
  const result = await client.void("pay_1", IdempotencyKey.forOperation("o", "void"));
  assert.ok(result.outcome.kind === "released" && result.outcome.payment.amount_captured?.value === "1000.00");
  assert.deepEqual(new Set(sent.map((s) => `${s.url} ${s.key} ${s.body}`)), new Set(["http://example.invalid/v1/payments/pay_1/void o-void {}"]));
  const refused = fakeClient([() => response(409, problem(409, "payment_not_voidable", { payment_status: "succeeded" }))]);
  const r = await refused.client.void("pay_1", "o-void");
  assert.ok(r.outcome.kind === "refused" && r.outcome.code === "payment_not_voidable");
  assert.equal(r.attempts.length, 1);
});

test("payOrder finds the order's authorization: authorized, nothing sent", async () => {
  const { client, sent } = fakeClient([() => response(200, { object: "list", data: [payment("authorized")], has_more: false })]);
  const result = await client.payOrder("order-123-pay", { amount: amount("1500.00", "RUB"), reference: "order-123", token: "tok_ok", captureMethod: "manual" });
  assert.ok(result.outcome.kind === "authorized" && result.foundBeforePaying);
  assert.deepEqual(sent.map((s) => s.method), ["GET"]);
});

// -- against a real server ------------------------------------------------------

let server: Server | null = null;
before(async () => {
  if (haveBinary()) server = await startServer();
});
after(async () => {
  await server?.stop();
});

const rub = (value: string) => amount(value, "RUB");
const order = (what: string) => `order-ts-${what}-${randomBytes(4).toString("hex")}`;
const RETRY = { budgetMs: 30_000, baseDelayMs: 50, maxDelayMs: 500 };

test("two shipments, a refund, a replay, a refusal and a void against a server", { timeout: 60_000 }, async (t) => {
  if (server === null) {
    t.skip("no chargeonce binary (set CHARGEONCE_BIN)");
    return;
  }
  const client = new Client(server.url, SHOP, SECRET, { retry: RETRY });
  const ref = order("ship");
  const authorized = await client.authorize(IdempotencyKey.forOperation(ref, "pay"), { amount: rub("1500.00"), reference: ref, token: "tok_ok" });
  assert.ok(authorized.outcome.kind === "authorized", JSON.stringify(authorized.outcome));
  const held = authorized.outcome.payment;
  assert.equal(held.status, "authorized");
  assert.equal(held.capture_method, "manual");
  assert.deepEqual(held.amount_capturable, rub("1500.00"));
  assert.equal(typeof held.authorization_expires_at, "string");

  const firstKey = IdempotencyKey.forOperation(ref, "capture-1");
  assert.equal(firstKey.value, `${ref}-capture-1`);
  const first = await client.capture(held.id, firstKey, { amount: rub("1000.00") });
  assert.ok(first.outcome.kind === "captured", JSON.stringify(first.outcome));
  assert.equal(first.outcome.capture.final, false);
  assert.equal((await client.payment(held.id)).status, "partially_captured");

  const replay = await client.capture(held.id, firstKey, { amount: rub("1000.00") });
  assert.ok(replay.outcome.kind === "captured" && replay.replayed && replay.attempts.length === 1);
  assert.deepEqual(replay.outcome.capture, first.outcome.capture);

  const tooMuch = await client.capture(held.id, IdempotencyKey.forOperation(ref, "capture-x"), { amount: rub("600.00") });
  assert.ok(tooMuch.outcome.kind === "refused", JSON.stringify(tooMuch.outcome));
  assert.equal(tooMuch.outcome.code, "capture_exceeds_capturable");
  assert.equal(tooMuch.outcome.status, 422);
  assert.deepEqual(tooMuch.outcome.problem.raw["amount_capturable"], rub("500.00"));
  assert.equal(tooMuch.attempts.length, 1);

  const second = await client.capture(held.id, IdempotencyKey.forOperation(ref, "capture-2"), { amount: rub("500.00") });
  assert.ok(second.outcome.kind === "captured", JSON.stringify(second.outcome));
  const refunded = await client.refund(held.id, IdempotencyKey.forOperation(ref, "refund-1"), { amount: rub("200.00") });
  assert.equal(refunded.outcome.kind, "refunded");

  const final = await client.payment(held.id);
  assert.equal(final.status, "succeeded");
  assert.deepEqual(final.amount_captured, rub("1500.00"));
  assert.deepEqual(final.amount_capturable, rub("0.00"));
  assert.deepEqual(final.amount_refunded, rub("200.00"));
  const listed: Capture[] = [];
  for await (const c of client.allPaymentCaptures(held.id, { limit: 1 })) listed.push(c);
  assert.deepEqual(listed.map((c) => c.id), [second.outcome.capture.id, first.outcome.capture.id]);
  assert.deepEqual(await client.captureById(first.outcome.capture.id), first.outcome.capture);
  assert.equal((await client.void(held.id, IdempotencyKey.forOperation(ref, "void"))).outcome.kind, "refused");

  // An authorization nobody captured, voided: nothing taken; its key replays; a capture then is refused.
  const other = order("void");
  const untouched = await client.authorize(IdempotencyKey.forOperation(other, "pay"), { amount: rub("300.00"), reference: other, token: "tok_ok" });
  assert.ok(untouched.outcome.kind === "authorized");
  const voidKey = IdempotencyKey.forOperation(other, "void");
  const voided = await client.void(untouched.outcome.payment.id, voidKey);
  assert.ok(voided.outcome.kind === "voided", JSON.stringify(voided.outcome));
  assert.equal(voided.outcome.payment.status, "voided");
  const again = await client.void(untouched.outcome.payment.id, voidKey);
  assert.ok(again.outcome.kind === "voided" && again.replayed);
  const late = await client.capture(untouched.outcome.payment.id, IdempotencyKey.forOperation(other, "capture-1"));
  assert.ok(late.outcome.kind === "refused" && late.outcome.code === "payment_not_capturable");
  assert.equal(late.outcome.problem.raw["payment_status"], "voided");
});

test("tok_timeout: the authorization, a capture and the void resolved by the client's own retries", { timeout: 60_000 }, async (t) => {
  if (server === null) {
    t.skip("no chargeonce binary (set CHARGEONCE_BIN)");
    return;
  }
  const client = new Client(server.url, SHOP, SECRET, { retry: RETRY });
  const ref = order("timeout");
  const status = (a: Attempt | undefined) => (a?.answer.kind === "http" ? a.answer.status : null);
  const authorized = await client.authorize(IdempotencyKey.forOperation(ref, "pay"), { amount: rub("1500.00"), reference: ref, token: "tok_timeout" });
  assert.ok(authorized.outcome.kind === "authorized", JSON.stringify(authorized.outcome));
  assert.equal(status(authorized.attempts[0]), 202);
  const pid = authorized.outcome.payment.id;
  const first = await client.capture(pid, IdempotencyKey.forOperation(ref, "capture-1"), { amount: rub("1000.00") });
  assert.ok(first.outcome.kind === "captured", JSON.stringify(first.outcome));
  assert.deepEqual([status(first.attempts[0]), status(first.attempts.at(-1))], [202, 201]);
  const released = await client.void(pid, IdempotencyKey.forOperation(ref, "void"));
  assert.ok(released.outcome.kind === "released", JSON.stringify(released.outcome));
  assert.deepEqual([status(released.attempts[0]), status(released.attempts.at(-1))], [202, 200]);
  const final = await client.payment(pid);
  assert.equal(final.status, "succeeded");
  assert.deepEqual(final.amount_captured, rub("1000.00"));
});

test("lost capture answers are retried with the same key and body bytes", { timeout: 60_000 }, async (t) => {
  if (server === null) {
    t.skip("no chargeonce binary (set CHARGEONCE_BIN)");
    return;
  }
  const setup = new Client(server.url, SHOP, SECRET, { retry: RETRY });
  const ref = order("lost");
  const authorized = await setup.authorize(IdempotencyKey.forOperation(ref, "pay"), { amount: rub("1500.00"), reference: ref, token: "tok_ok" });
  assert.ok(authorized.outcome.kind === "authorized");
  const pid = authorized.outcome.payment.id;
  const key = IdempotencyKey.forOperation(ref, "capture-1");
  const proxy = await startProxy(server.url, [{ method: "POST", path: `/v1/payments/${pid}/captures`, key: key.value, count: 2 }]);
  try {
    const client = new Client(proxy.url, SHOP, SECRET, { retry: RETRY });
    const done = await client.capture(pid, key, { amount: rub("1500.00"), final: true });
    assert.ok(done.outcome.kind === "captured" && done.outcome.capture.final, JSON.stringify(done.outcome));
    assert.deepEqual(done.attempts.map((a) => (a.answer.kind === "failed" ? a.answer.failure : a.answer.status)), ["lost", "lost", 201]);
    assert.equal(done.replayed, true);
    assert.equal(proxy.lost, 2);
    const perKey = checkSameBytesPerKey(proxy.requests, "capture behind the proxy");
    assert.equal(perKey.get(key.value), 3);
    assert.equal(proxy.requests[0]!.body.toString(), `{"amount":{"value":"1500.00","currency":"RUB"},"final":true}`);
  } finally {
    await proxy.stop();
  }
});

test("an expired authorization refuses captures and voids", { timeout: 60_000 }, async (t) => {
  if (!haveBinary()) {
    t.skip("no chargeonce binary (set CHARGEONCE_BIN)");
    return;
  }
  // Authorizations held one second, the expirer passing every 200 ms.
  const expiring = await startServer(["--authorization-ttl", "1s", "--expiry-interval", "200ms"]);
  try {
    const client = new Client(expiring.url, SHOP, SECRET, { retry: RETRY });
    const ref = order("expiry");
    const held = await client.authorize(IdempotencyKey.forOperation(ref, "pay"), { amount: rub("100.00"), reference: ref, token: "tok_ok" });
    assert.ok(held.outcome.kind === "authorized");
    const pid = held.outcome.payment.id;
    const deadline = Date.now() + 15_000;
    let payment = await client.payment(pid);
    while (payment.status !== "expired") {
      assert.ok(Date.now() < deadline, `not expired: ${JSON.stringify(payment)}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
      payment = await client.payment(pid);
    }
    assert.deepEqual(payment.amount_capturable, rub("0.00"));
    const late = await client.capture(pid, IdempotencyKey.forOperation(ref, "capture-1"));
    assert.ok(late.outcome.kind === "refused" && late.outcome.code === "payment_not_capturable", JSON.stringify(late.outcome));
    assert.equal(late.outcome.problem.raw["payment_status"], "expired");
    const voided = await client.void(pid, IdempotencyKey.forOperation(ref, "void"));
    assert.ok(voided.outcome.kind === "refused" && voided.outcome.code === "payment_not_voidable");
  } finally {
    await expiring.stop();
  }
});
