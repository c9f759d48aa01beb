// Issue 16: a real `chargeonce serve` behind the recording fault proxy. Lost
// answers are retried with the same key and the same body bytes (the proxy
// saw them); a 422 key-reused answer is never retried.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { Client, IdempotencyKey, KeyReusedError, amount } from "../src/index.js";
import { checkSameBytesPerKey, haveBinary, startProxy, startServer, SECRET, SHOP, type Server } from "./harness.js";

const fast = { baseDelayMs: 10, maxDelayMs: 50, budgetMs: 30_000 };
let server: Server | null = null;

before(async () => {
  if (haveBinary()) server = await startServer();
});
after(async () => {
  await server?.stop();
});

function runId(): string {
  return `ts-retry-bytes-${randomBytes(3).toString("hex")}`;
}

test("two lost answers: three requests through the proxy, one key, the same body bytes, paid", { timeout: 60_000 }, async (t) => {
  if (server === null) {
    t.skip("no chargeonce binary (set CHARGEONCE_BIN)");
    return;
  }
  const reference = `A-${runId()}`;
  const key = IdempotencyKey.forOperation(reference, "pay");
  const proxy = await startProxy(server.url, [{ method: "POST", path: "/v1/payments", key: key.value, count: 2 }]);
  try {
    const client = new Client(proxy.url, SHOP, SECRET, { retry: fast });
    const result = await client.pay(key, { amount: amount("15.00", "RUB"), reference, token: "tok_ok" });
    assert.equal(result.outcome.kind, "paid");
    assert.equal(result.attempts.length, 3);
    assert.equal(proxy.lost, 2);

    const mine = proxy.requests.filter((r) => r.key === key.value);
    assert.equal(mine.length, 3, "exactly 3 recorded requests with the key");
    assert.ok(proxy.requests.every((r) => r.key === key.value), "every request through the proxy carried the key");
    for (const r of mine) {
      assert.equal(r.method, "POST");
      assert.equal(r.path, "/v1/payments");
      assert.ok(r.body.length > 0, "a body was sent");
      assert.ok(r.body.equals(mine[0]!.body), `body bytes differ:\n${mine[0]!.body.toString("hex")}\n${r.body.toString("hex")}`);
    }
    const sent = JSON.parse(mine[0]!.body.toString("utf8")) as { amount?: unknown; reference?: unknown };
    assert.deepEqual(sent.amount, { value: "15.00", currency: "RUB" });
    assert.equal(sent.reference, reference);
    assert.deepEqual([...checkSameBytesPerKey(proxy.requests, "retry_bytes")], [[key.value, 3]]);
  } finally {
    await proxy.stop();
  }
});

test("the same key with another amount: KeyReusedError, one request through the proxy, no retry", { timeout: 60_000 }, async (t) => {
  if (server === null) {
    t.skip("no chargeonce binary (set CHARGEONCE_BIN)");
    return;
  }
  const reference = `B-${runId()}`;
  const key = IdempotencyKey.forOperation(reference, "pay");
  const direct = new Client(server.url, SHOP, SECRET, { retry: fast });
  const first = await direct.pay(key, { amount: amount("15.00", "RUB"), reference, token: "tok_ok" });
  assert.equal(first.outcome.kind, "paid");

  const proxy = await startProxy(server.url, []);
  try {
    const client = new Client(proxy.url, SHOP, SECRET, { retry: fast });
    const error = await client.pay(key, { amount: amount("16.00", "RUB"), reference, token: "tok_ok" }).then(
      () => assert.fail("the second call with another amount succeeded"),
      (e: unknown) => e,
    );
    assert.ok(error instanceof KeyReusedError, `expected KeyReusedError, got ${String(error)}`);
    assert.equal(error.status, 422);
    assert.equal(error.code, "idempotency_key_reused");
    assert.equal(error.attempts, 1);

    const mine = proxy.requests.filter((r) => r.key === key.value);
    assert.equal(mine.length, 1, "exactly 1 recorded request for the second call");
    assert.equal(proxy.requests.length, 1, "nothing else went through the proxy");
    const sent = JSON.parse(mine[0]!.body.toString("utf8")) as { amount?: unknown };
    assert.deepEqual(sent.amount, { value: "16.00", currency: "RUB" });
  } finally {
    await proxy.stop();
  }
});

test("the recorded-request check rejects another body, method or path under one key", () => {
  const req = (body: string, method = "POST", path = "/v1/payments", key: string | null = "k-pay") => ({
    method,
    path,
    key: key ?? undefined,
    body: Buffer.from(body),
  });
  const counts = checkSameBytesPerKey([req("{}"), req("", "GET", "/v1/payments", null), req("{}"), req("x", "POST", "/v1/payments", "k2")], "ok");
  assert.deepEqual([...counts], [["k-pay", 2], ["k2", 1]]);
  assert.throws(() => checkSameBytesPerKey([req('{"a":1}'), req('{"a":1} ')], "t"), /other body bytes/);
  assert.throws(() => checkSameBytesPerKey([req("{}"), req("{}", "PUT")], "t"), /is PUT/);
  assert.throws(() => checkSameBytesPerKey([req("{}"), req("{}", "POST", "/v1/refunds")], "t"), /\/v1\/refunds/);
});
