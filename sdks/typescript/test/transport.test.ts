// The real platform fetch against small local servers: an attempt that gets
// no answer is aborted by its own timeout and retried with the same key and
// bytes; a refused connection is "connect" (nothing sent); a connection
// closed mid-answer is "lost".
import { test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { Client, amount, UnavailableError } from "../src/index.js";

const paid = JSON.stringify({
  id: "pay_1",
  object: "payment",
  shop_id: "demo",
  status: "succeeded",
  amount: { value: "15.00", currency: "RUB" },
  reference: "o-1",
  provider_payment_id: "ch_1",
  decline_code: null,
  created_at: "2026-12-02T05:00:00Z",
  amount_refunded: { value: "0.00", currency: "RUB" },
  refund_status: "none",
});

async function listen(handler: http.RequestListener): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  assert.ok(address !== null && typeof address !== "string");
  return {
    url: `http://127.0.0.1:${address.port}`,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

test("a hung attempt times out on its own signal and the retry carries the same key and bytes", async () => {
  const seen: Array<{ key: string | undefined; body: string }> = [];
  let n = 0;
  const server = await listen((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      seen.push({ key: req.headers["idempotency-key"] as string | undefined, body: Buffer.concat(chunks).toString() });
      n += 1;
      if (n === 1) return; // never answers
      if (n === 2) {
        req.socket.destroy(); // a lost answer
        return;
      }
      res.writeHead(201, { "content-type": "application/json", "idempotent-replayed": "true" });
      res.end(paid);
    });
  });
  try {
    const client = new Client(server.url, "demo", "sk", { retry: { attemptTimeoutMs: 1000, baseDelayMs: 10, maxDelayMs: 20 } });
    const result = await client.pay("o-1-pay", { amount: amount("15.00", "RUB"), reference: "o-1", token: "tok_ok" });
    assert.equal(result.outcome.kind, "paid");
    assert.deepEqual(
      result.attempts.map((a) => (a.answer.kind === "http" ? a.answer.status : a.answer.failure)),
      ["timeout", "lost", 201],
    );
    assert.equal(seen.length, 3);
    assert.ok(seen.every((s) => s.key === "o-1-pay" && s.body === seen[0]!.body));
  } finally {
    await server.close();
  }
});

test("a refused connection is 'connect'; a payment that never reached the server is uncertain, a read is UnavailableError", async () => {
  const server = await listen(() => undefined);
  const url = server.url;
  await server.close();
  const client = new Client(url, "demo", "sk", { retry: { budgetMs: 3000, baseDelayMs: 10, maxDelayMs: 20 } });
  const result = await client.pay("o-2-pay", { amount: amount("15.00", "RUB"), reference: "o-2", token: "tok_ok" });
  assert.deepEqual(result.outcome, { kind: "uncertain" });
  assert.ok(result.attempts.length >= 2);
  assert.ok(result.attempts.every((a) => a.answer.kind === "failed" && a.answer.failure === "connect"));
  await assert.rejects(client.payment("pay_1"), UnavailableError);
});
