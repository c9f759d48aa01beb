import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import {
  IdempotencyKey,
  KeyError,
  retryPolicy,
  ceilingMs,
  delayMs,
  preferSeconds,
  parseRetryAfter,
  transient,
  judgePayment,
  judgeRefund,
  judgeCancel,
  parseProblem,
  KeyReusedError,
  ProblemError,
  UnexpectedAnswerError,
  classifyFailure,
  paymentBody,
  refundBody,
  amount,
  signWebhook,
  verifyWebhook,
  parseSignatureHeader,
  SignatureError,
  Client,
  type Answer,
} from "../src/index.js";

// The vectors of crates/core/src/key.rs.
test("keys come from the operation", () => {
  const pay = IdempotencyKey.forOperation("order-123", "pay");
  assert.equal(pay.value, "order-123-pay");
  assert.equal(IdempotencyKey.forOperation("order-123", "refund-1").value, "order-123-refund-1");
  assert.ok(pay.equals(IdempotencyKey.forOperation("order-123", "pay")));
  assert.ok(!pay.equals(IdempotencyKey.forOperation("order-124", "pay")));
});

test("operation keys encode what a key cannot hold", () => {
  const key = IdempotencyKey.forOperation("order 7", "pay");
  assert.equal(key.value, "order%207-pay");
  const literal = IdempotencyKey.forOperation("order%207", "pay");
  assert.equal(literal.value, "order%25207-pay");
  assert.ok(!key.equals(literal));
  assert.equal(IdempotencyKey.forOperation("заказ", "pay").value, "%D0%B7%D0%B0%D0%BA%D0%B0%D0%B7-pay");
  assert.equal(IdempotencyKey.forOperation("заказ 7", "pay").value, "%D0%B7%D0%B0%D0%BA%D0%B0%D0%B7%207-pay");
  assert.throws(() => IdempotencyKey.forOperation("", "pay"), (e: unknown) => e instanceof KeyError && e.kind === "empty");
  assert.throws(() => IdempotencyKey.forOperation("order-1", ""), (e: unknown) => e instanceof KeyError && e.kind === "empty");
  assert.throws(
    () => IdempotencyKey.forOperation("x".repeat(252), "pay"),
    (e: unknown) => e instanceof KeyError && e.kind === "too_long" && e.at === 256,
  );
  assert.equal(IdempotencyKey.forOperation("x".repeat(251), "pay").value.length, 255);
  // Control characters, DEL and emoji are encoded byte by byte.
  assert.equal(IdempotencyKey.forOperation("a\tb\x7f", "pay").value, "a%09b%7F-pay");
  assert.equal(IdempotencyKey.forOperation("€", "pay").value, "%E2%82%AC-pay");
});

test("plain keys are validated like the server's", () => {
  assert.equal(IdempotencyKey.of("k".repeat(255)).value.length, 255);
  assert.throws(() => IdempotencyKey.of("k".repeat(256)), (e: unknown) => e instanceof KeyError && e.kind === "too_long");
  for (const bad of ["a b", "a\0b", "a\x7fb", "ключ", "a\x01"]) {
    assert.throws(() => IdempotencyKey.of(bad), (e: unknown) => e instanceof KeyError && e.kind === "invalid_character", bad);
  }
  assert.throws(() => IdempotencyKey.of(""), KeyError);
  assert.equal(IdempotencyKey.of("';DROP_TABLE_idempotency_keys;--%_\\$$").value, "';DROP_TABLE_idempotency_keys;--%_\\$$");
});

test("random keys are valid, distinct, and never printed", () => {
  const a = IdempotencyKey.randomForThisProcessOnly();
  const b = IdempotencyKey.randomForThisProcessOnly();
  assert.ok(!a.equals(b));
  assert.match(a.value, /^rnd-[0-9a-f]{32}$/);
  assert.equal(a.value.length, 36);
  assert.equal(IdempotencyKey.of(a.value).value, a.value);
  const secret = IdempotencyKey.of("secret-order-42");
  assert.ok(!String(secret).includes("secret"));
  assert.ok(!JSON.stringify({ secret }).includes("secret-order"));
  assert.equal(secret.logId().length, 12);
  // sha256("order-123-pay"), its first 6 bytes.
  assert.equal(IdempotencyKey.of("order-123-pay").logId(), createHash("sha256").update("order-123-pay").digest("hex").slice(0, 12));
});

test("backoff grows exponentially to a cap, with full jitter under it", () => {
  const policy = retryPolicy({ baseDelayMs: 100, maxDelayMs: 1000 });
  assert.deepEqual([1, 2, 3, 4, 5, 50].map((n) => ceilingMs(policy, n)), [100, 200, 400, 800, 1000, 1000]);
  const seen = new Set<number>();
  for (let i = 0; i < 200; i++) {
    const d = delayMs(policy, 3, null);
    assert.ok(d >= 0 && d <= 400);
    seen.add(d);
  }
  assert.ok(seen.size > 10, "jitter spreads the waits");
  assert.equal(delayMs(policy, 3, null, () => 0), 0);
  assert.equal(delayMs(policy, 3, null, () => 0.999999), 400);
  for (let i = 0; i < 50; i++) assert.ok(delayMs(policy, 1, 2000) >= 2000, "never sooner than Retry-After");
  assert.equal(retryPolicy({ maxAttempts: 0 }).maxAttempts, 1);
});

test("Retry-After: seconds and dates", () => {
  const now = 1_000_000_000_000;
  assert.equal(parseRetryAfter("3", now), 3000);
  assert.equal(parseRetryAfter(" 0 ", now), 0);
  assert.equal(parseRetryAfter(new Date(now + 7000).toUTCString(), now), 7000);
  assert.equal(parseRetryAfter(new Date(now - 7000).toUTCString(), now), 0);
  assert.equal(parseRetryAfter("soon", now), null);
  assert.equal(parseRetryAfter("-1", now), null);
});

test("Prefer: wait fits inside the attempt", () => {
  const policy = retryPolicy({ preferWaitMs: 10_000 });
  assert.equal(preferSeconds(policy, 20_000), 10);
  assert.equal(preferSeconds(policy, 4_000), 3);
  assert.equal(preferSeconds(policy, 1_500), null);
  assert.equal(preferSeconds(retryPolicy({ preferWaitMs: null }), 20_000), null);
});

test("transient statuses", () => {
  for (const s of [408, 409, 425, 429, 500, 502, 503, 504]) assert.ok(transient(s), String(s));
  for (const s of [200, 201, 202, 400, 401, 402, 404, 413, 415, 422]) assert.ok(!transient(s), String(s));
});

const payment = (status: string) => ({
  id: "pay_1",
  object: "payment",
  shop_id: "demo",
  status,
  amount: { value: "1500.00", currency: "RUB" },
  reference: "order-123",
  provider_payment_id: "ch_1",
  decline_code: status === "declined" ? "card_declined" : null,
  created_at: "2026-11-29T22:42:32.243Z",
  amount_refunded: { value: "0.00", currency: "RUB" },
  refund_status: "none",
});
const json = (status: number, body: unknown, headers: Record<string, string> = {}): Answer => ({
  status,
  headers: { "content-type": status >= 400 ? "application/problem+json" : "application/json", ...headers },
  body: JSON.stringify(body),
});
const problem = (status: number, code: string, extra: Record<string, unknown> = {}) => ({
  type: `urn:chargeonce:problem:${code}`,
  title: "T",
  status,
  detail: "D",
  code,
  request_id: "req-1",
  ...extra,
});

test("payment answers: definite, retried, refused", () => {
  const paid = judgePayment(json(201, payment("succeeded"), { "idempotent-replayed": "true" }), 1);
  assert.equal(paid.step.kind, "done");
  assert.deepEqual(paid.step.kind === "done" && paid.step.outcome.kind, "paid");
  assert.equal(paid.seen.kind === "http" && paid.seen.replayed, true);
  assert.equal(paid.namedId, "pay_1");

  const pending = judgePayment(json(202, payment("pending"), { "retry-after": "2" }), 1, 0);
  assert.deepEqual(pending.step, { kind: "retry", retryAfterMs: 2000 });
  assert.equal(pending.namedId, "pay_1");
  // A success status with a pending payment is not known yet either.
  assert.equal(judgePayment(json(200, payment("pending")), 1).step.kind, "retry");
  // A 202 that says succeeded is still not definite.
  assert.equal(judgePayment(json(202, payment("succeeded")), 1).step.kind, "retry");
  // A mangled success body: ask again.
  assert.equal(judgePayment({ status: 201, headers: {}, body: "<html>" }, 1).step.kind, "retry");

  const declined = judgePayment(json(402, problem(402, "payment_declined", { payment: payment("declined") })), 1);
  assert.ok(declined.step.kind === "done" && declined.step.outcome.kind === "declined");

  for (const [status, code] of [
    [409, "request_in_progress"],
    [429, "rate_limited"],
    [500, "internal_error"],
    [503, "acquirer_unavailable"],
  ] as const) {
    assert.equal(judgePayment(json(status, problem(status, code)), 1).step.kind, "retry", code);
  }
  assert.equal(judgePayment({ status: 502, headers: { "content-type": "text/html" }, body: "bad gateway" }, 1).step.kind, "retry");

  const reused = judgePayment(json(422, problem(422, "idempotency_key_reused")), 1);
  assert.ok(reused.step.kind === "fail" && reused.step.error instanceof KeyReusedError);
  const refused = judgePayment(json(422, problem(422, "invalid_amount")), 2);
  assert.ok(refused.step.kind === "fail" && refused.step.error instanceof ProblemError && !(refused.step.error instanceof KeyReusedError));
  if (refused.step.kind === "fail" && refused.step.error instanceof ProblemError) {
    assert.equal(refused.step.error.code, "invalid_amount");
    assert.equal(refused.step.error.status, 422);
    assert.equal(refused.step.error.requestId, "req-1");
    assert.equal(refused.step.error.detail, "D");
    assert.equal(refused.step.error.attempts, 2);
  }
  const proxy = judgePayment({ status: 404, headers: { "content-type": "text/html" }, body: "<html>" }, 1);
  assert.ok(proxy.step.kind === "fail" && proxy.step.error instanceof UnexpectedAnswerError);
});

test("refund answers", () => {
  const refund = (status: string) => ({
    id: "re_1",
    object: "refund",
    payment_id: "pay_1",
    shop_id: "demo",
    status,
    amount: { value: "500.00", currency: "RUB" },
    provider_refund_id: null,
    failure_code: status === "failed" ? "x" : null,
    created_at: "2026-11-29T22:45:01.120Z",
  });
  const ok = judgeRefund(json(201, refund("succeeded")), 1);
  assert.ok(ok.step.kind === "done" && ok.step.outcome.kind === "refunded");
  assert.equal(judgeRefund(json(202, refund("pending")), 1).step.kind, "retry");
  const failed = judgeRefund(json(422, problem(422, "refund_failed", { refund: refund("failed") })), 1);
  assert.ok(failed.step.kind === "done" && failed.step.outcome.kind === "failed");
  const exceeds = judgeRefund(json(422, problem(422, "refund_exceeds_amount")), 1);
  assert.ok(exceeds.step.kind === "fail" && exceeds.step.error instanceof ProblemError);
  assert.equal(judgeRefund(json(409, problem(409, "payment_not_refundable")), 1).step.kind, "retry");
});

test("problem documents keep unknown codes as strings", () => {
  const p = parseProblem(418, JSON.stringify({ code: "brand_new" }), "hdr-id");
  assert.ok(p !== null);
  assert.equal(p.code, "brand_new");
  assert.equal(p.known, false);
  assert.equal(p.status, 418);
  assert.equal(p.requestId, "hdr-id");
  assert.equal(parseProblem(502, "<html>bad gateway</html>"), null);
  assert.equal(parseProblem(404, JSON.stringify({ error: "x" })), null);
  const known = parseProblem(422, JSON.stringify(problem(422, "idempotency_key_reused")));
  assert.equal(known?.known, true);
  assert.equal(known?.requestId, "req-1");
});

test("transport failures are classified", () => {
  const refused = Object.assign(new TypeError("fetch failed"), { cause: Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" }) });
  assert.equal(classifyFailure(refused).failure, "connect");
  const reset = Object.assign(new TypeError("fetch failed"), { cause: Object.assign(new Error("other side closed"), { code: "UND_ERR_SOCKET" }) });
  assert.equal(classifyFailure(reset).failure, "lost");
  const timeout = new DOMException("The operation was aborted due to timeout", "TimeoutError");
  assert.equal(classifyFailure(timeout).failure, "timeout");
  // A lost route is "never sent" only when the connect failed; on a pooled
  // socket the POST may have been written already.
  const unreachable = (syscall: string) =>
    Object.assign(new TypeError("fetch failed"), { cause: Object.assign(new Error(`${syscall} EHOSTUNREACH`), { code: "EHOSTUNREACH", syscall }) });
  assert.equal(classifyFailure(unreachable("connect")).failure, "connect");
  assert.equal(classifyFailure(unreachable("write")).failure, "lost");
  const netDown = Object.assign(new TypeError("fetch failed"), { cause: Object.assign(new Error("read ENETUNREACH"), { code: "ENETUNREACH", syscall: "read" }) });
  assert.equal(classifyFailure(netDown).failure, "lost");
});

test("bodies: money as decimal strings, serialised once", () => {
  assert.equal(
    paymentBody({ amount: amount("1500.00", "RUB"), reference: "order-123", token: "tok_ok" }),
    '{"amount":{"value":"1500.00","currency":"RUB"},"reference":"order-123","payment_method":{"token":"tok_ok"}}',
  );
  assert.equal(refundBody({}), "{}");
  assert.equal(refundBody({ amount: amount("5", "JPY") }), '{"amount":{"value":"5","currency":"JPY"}}');
  assert.throws(() => amount(1500 as unknown as string, "RUB"), TypeError);
  assert.throws(() => amount("15,00", "RUB"), TypeError);
});

test("webhook signatures: the server's scheme", () => {
  const secret = "whsec_test";
  const body = '{"id":"evt_1"}';
  const header = signWebhook(secret, 1_700_000_000, body);
  assert.match(header, /^t=1700000000,v1=[0-9a-f]{64}$/);
  verifyWebhook(secret, header, body, { now: 1_700_000_100 });
  verifyWebhook(secret, header, Buffer.from(body), { now: 1_700_000_100 });
  const kind = (f: () => void) => {
    try {
      f();
      return "ok";
    } catch (e) {
      assert.ok(e instanceof SignatureError);
      return e.kind;
    }
  };
  assert.equal(kind(() => verifyWebhook(secret, header, "{}", { now: 1_700_000_100 })), "mismatch");
  assert.equal(kind(() => verifyWebhook(secret, header, body, { now: 1_700_000_400 })), "outside_tolerance");
  assert.equal(kind(() => verifyWebhook(secret, header, body, { now: 1_699_999_600 })), "outside_tolerance");
  assert.equal(kind(() => verifyWebhook("whsec_other", header, body, { now: 1_700_000_000 })), "mismatch");
  // Rotation: several signatures, several secrets.
  const other = signWebhook("whsec_old", 1_700_000_000, body).split(",")[1];
  assert.equal(kind(() => verifyWebhook(secret, `${header},${other}`, body, { now: 1_700_000_000 })), "ok");
  assert.equal(kind(() => verifyWebhook(["whsec_new", secret], header, body, { now: 1_700_000_000 })), "ok");
  // Malformed headers.
  for (const bad of ["", "t=1", "v1=" + "0".repeat(64), "t=1,v1=00", "t=x,v1=" + "0".repeat(64), "t=1,t=2,v1=" + "0".repeat(64), "garbage"]) {
    assert.equal(kind(() => parseSignatureHeader(bad)), "malformed", bad);
  }
  const nine = Array.from({ length: 9 }, () => "v1=" + "0".repeat(64)).join(",");
  assert.equal(kind(() => parseSignatureHeader(`t=1,${nine}`)), "malformed");
  assert.equal(kind(() => parseSignatureHeader("t=1,v1=" + "0".repeat(64) + ",x=" + "y".repeat(1100))), "malformed");
  assert.equal(parseSignatureHeader(" t=1 , v1=" + "a".repeat(64) + " , v2=zz").signatures.length, 1);
  assert.equal(kind(() => verifyWebhook(secret, undefined, body)), "malformed");
});

// The retry loop with a fake fetch: same key, same bytes, Retry-After honoured, budget ends in uncertain.
test("an aborted payment call ends uncertain, never in an error", async () => {
  // The server hangs: every attempt ends only when its signal aborts.
  let sent = 0;
  const hanging = ((_url: unknown, init?: RequestInit) => {
    sent += 1;
    return new Promise<Response>((_resolve, reject) => {
      init?.signal?.addEventListener("abort", () => reject(init.signal?.reason ?? new DOMException("aborted", "AbortError")), { once: true });
    });
  }) as typeof fetch;
  const client = new Client("http://example.invalid", "demo", "sk", { fetch: hanging });
  const request = { amount: amount("1500.00", "RUB"), reference: "order-abort", token: "tok_ok" };
  const controller = new AbortController();
  setTimeout(() => controller.abort(), 50);
  const result = await client.pay(IdempotencyKey.forOperation("order-abort", "pay"), request, { signal: controller.signal });
  assert.equal(result.outcome.kind, "uncertain", "the attempt may have been sent");
  assert.equal(sent, 1);
  // A deadline is a signal too; one already aborted sends nothing and is still uncertain.
  const late = await client.pay(IdempotencyKey.forOperation("order-abort", "pay"), request, { signal: AbortSignal.abort() });
  assert.equal(late.outcome.kind, "uncertain");
  assert.equal(sent, 1, "nothing sent once aborted");
});

test("retry loop: same key and bytes, Retry-After, uncertain at the end of the budget", async () => {
  const seen: Array<{ key: string | null; body: string; prefer: string | null }> = [];
  let clock = 0;
  const sleeps: number[] = [];
  const answers: Array<() => Response> = [
    () => {
      throw Object.assign(new TypeError("fetch failed"), { cause: { code: "UND_ERR_SOCKET", message: "other side closed" } });
    },
    () => new Response(JSON.stringify(problem(409, "request_in_progress")), { status: 409, headers: { "content-type": "application/problem+json", "retry-after": "1" } }),
    () => new Response(JSON.stringify(payment("pending")), { status: 202, headers: { "content-type": "application/json" } }),
    () => new Response(JSON.stringify(payment("succeeded")), { status: 201, headers: { "content-type": "application/json", "idempotent-replayed": "true" } }),
  ];
  const fakeFetch = (async (_url: unknown, init?: RequestInit) => {
    const headers = new Headers(init?.headers);
    seen.push({ key: headers.get("idempotency-key"), body: String(init?.body), prefer: headers.get("prefer") });
    const next = answers.shift();
    assert.ok(next);
    return next();
  }) as typeof fetch;
  const client = new Client("http://example.invalid", "demo", "sk", {
    fetch: fakeFetch,
    now: () => clock,
    sleep: async (ms) => {
      sleeps.push(ms);
      clock += ms;
    },
    random: () => 0.5,
  });
  const result = await client.pay(IdempotencyKey.forOperation("order-123", "pay"), {
    amount: amount("1500.00", "RUB"),
    reference: "order-123",
    token: "tok_ok",
  });
  assert.equal(result.outcome.kind, "paid");
  assert.equal(result.attempts.length, 4);
  assert.equal(result.replayed, true);
  assert.ok(seen.every((s) => s.key === "order-123-pay" && s.body === seen[0]!.body && s.prefer === "wait=10"));
  assert.ok((sleeps[1] ?? 0) >= 1000, "the 409's Retry-After");
  assert.deepEqual(result.attempts.map((a) => (a.answer.kind === "http" ? a.answer.status : a.answer.failure)), ["lost", 409, 202, 201]);

  // Every attempt lost: the budget ends in uncertain, never an error.
  clock = 0;
  const lost = new Client("http://example.invalid", "demo", "sk", {
    retry: { budgetMs: 2000, maxDelayMs: 400 },
    fetch: (async () => new Response(JSON.stringify(payment("pending")), { status: 202, headers: { "content-type": "application/json" } })) as typeof fetch,
    now: () => clock,
    sleep: async (ms) => {
      clock += ms + 100;
    },
  });
  const r = await lost.pay("order-9-pay", { amount: amount("1.00", "RUB"), reference: "order-9", token: "tok_timeout" });
  assert.deepEqual(r.outcome, { kind: "uncertain", paymentId: "pay_1" });

  // KeyReused: thrown, one attempt, never retried.
  let calls = 0;
  const reused = new Client("http://example.invalid", "demo", "sk", {
    fetch: (async () => {
      calls++;
      return new Response(JSON.stringify(problem(422, "idempotency_key_reused")), { status: 422, headers: { "content-type": "application/problem+json" } });
    }) as typeof fetch,
  });
  await assert.rejects(reused.pay("k-pay", { amount: amount("1.00", "RUB"), reference: "k", token: "tok_ok" }), KeyReusedError);
  assert.equal(calls, 1);
});

test("judgement is pure: the key, retry, outcome, problem, model and webhook modules do no I/O", async () => {
  const { readFileSync } = await import("node:fs");
  const { fileURLToPath } = await import("node:url");
  for (const name of ["key", "retry", "outcome", "problem", "model", "webhook"]) {
    const source = readFileSync(fileURLToPath(new URL(`../src/${name}.js`, import.meta.url)), "utf8");
    assert.ok(!/\bfetch\s*\(|node:http|node:net|node:fs|setTimeout/.test(source), `${name}.js does I/O`);
  }
});

test("a refusal after an attempt that may have executed is uncertain, never an error", async () => {
  const answers: Array<() => Response> = [
    () => {
      throw Object.assign(new TypeError("fetch failed"), { cause: { code: "UND_ERR_SOCKET", message: "other side closed" } });
    },
    () =>
      new Response(JSON.stringify({ type: "t", title: "t", status: 422, detail: "d", code: "invalid_amount" }), {
        status: 422,
        headers: { "content-type": "application/problem+json" },
      }),
  ];
  const client = new Client("http://example.invalid", "demo", "sk", {
    fetch: (async () => answers.shift()!()) as typeof fetch,
    sleep: async () => undefined,
  });
  const r = await client.pay("o-pay", { amount: amount("1.00", "RUB"), reference: "o", token: "tok_ok" });
  assert.deepEqual(r.outcome, { kind: "uncertain" });
  assert.equal(r.attempts.length, 2);
});

test("a canceled payment is its own pay outcome, never paid", () => {
  const canceled = judgePayment(json(409, problem(409, "payment_canceled", { payment: payment("canceled") })), 1);
  assert.ok(canceled.step.kind === "done" && canceled.step.outcome.kind === "canceled");
  assert.equal(canceled.namedId, "pay_1");
});

test("cancel answers end by the payment they carry", () => {
  const refunded = { ...payment("succeeded"), amount_refunded: { value: "1500.00", currency: "RUB" }, refund_status: "refunded" };
  const partly = { ...payment("succeeded"), amount_refunded: { value: "500.00", currency: "RUB" } };
  for (const [body, kind] of [
    [payment("canceled"), "canceled"],
    [payment("declined"), "declined"],
    [refunded, "refunded"],
    [partly, "charged"],
  ] as const) {
    const judged = judgeCancel(json(200, body), 1);
    assert.ok(judged.step.kind === "done" && judged.step.outcome.kind === kind, kind);
  }
  // 202: not ended yet (the charge is looked up after the settle window); asked again.
  assert.deepEqual(judgeCancel(json(202, payment("pending"), { "retry-after": "2" }), 1, 0).step, { kind: "retry", retryAfterMs: 2000 });
  // A payment final before the cancel: a stored refusal, never retried.
  const refused = judgeCancel(json(409, problem(409, "payment_not_cancelable", { payment: payment("succeeded") })), 1);
  assert.ok(refused.step.kind === "fail" && refused.step.error instanceof ProblemError);
  assert.equal(refused.step.kind === "fail" && refused.step.error instanceof ProblemError && refused.step.error.code, "payment_not_cancelable");
  // 409 in progress is retried as for every keyed POST.
  assert.equal(judgeCancel(json(409, problem(409, "request_in_progress")), 1).step.kind, "retry");
});
