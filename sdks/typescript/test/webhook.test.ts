// The verifier against the server's own signatures: a receiver gets the
// merchant events the outbox relay POSTs (shops set-webhook), verifies each
// raw body with verifyWebhook, and refuses a tampered one.
import { test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { Client, IdempotencyKey, amount, parseWebhook, verifyWebhook, SignatureError, SIGNATURE_HEADER, type MerchantEvent } from "../src/index.js";
import { haveBinary, startServer, SECRET, SHOP } from "./harness.js";

const WEBHOOK_SECRET = "whsec_ts_0123456789abcdef";

test("merchant events from a real server verify; a tampered body does not", { timeout: 60_000 }, async (t) => {
  if (!haveBinary()) {
    t.skip("no chargeonce binary (set CHARGEONCE_BIN)");
    return;
  }
  const events: MerchantEvent[] = [];
  const refusals: string[] = [];
  let resolveFirst: () => void = () => undefined;
  const first = new Promise<void>((resolve) => (resolveFirst = resolve));
  const receiver = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const raw = Buffer.concat(chunks);
      const header = req.headers[SIGNATURE_HEADER] as string | undefined;
      try {
        const event = parseWebhook(WEBHOOK_SECRET, header, raw);
        assert.equal(req.headers["chargeonce-event-id"], event.id);
        events.push(event);
        // The same header over other bytes must not verify.
        try {
          verifyWebhook(WEBHOOK_SECRET, header, Buffer.concat([raw, Buffer.from(" ")]));
          refusals.push("tampered body verified");
        } catch (e) {
          assert.ok(e instanceof SignatureError && e.kind === "mismatch");
        }
        res.writeHead(204).end();
        resolveFirst();
      } catch (e) {
        refusals.push(String(e));
        res.writeHead(400).end();
      }
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
  const address = receiver.address();
  assert.ok(address !== null && typeof address !== "string");
  const server = await startServer(["--relay-interval", "200ms"], { url: `http://127.0.0.1:${address.port}/hook`, secret: WEBHOOK_SECRET });
  try {
    const client = new Client(server.url, SHOP, SECRET);
    const result = await client.pay(IdempotencyKey.forOperation("wh-1", "pay"), { amount: amount("15.00", "RUB"), reference: "wh-1", token: "tok_ok" });
    assert.equal(result.outcome.kind, "paid");
    await Promise.race([first, new Promise((_, reject) => setTimeout(() => reject(new Error("no event within 20 s")), 20_000))]);
    assert.deepEqual(refusals, []);
    const event = events[0]!;
    assert.equal(event.type, "payment.succeeded");
    const payment = (event.data as { payment?: { reference?: string; amount?: unknown } }).payment;
    assert.equal(payment?.reference, "wh-1");
    assert.deepEqual(payment?.amount, { value: "15.00", currency: "RUB" });
    // Another secret refuses the same delivery.
    assert.throws(() => verifyWebhook("whsec_someone_else_0000", "t=1,v1=" + "0".repeat(64), "{}", { now: 1 }), SignatureError);
  } finally {
    await server.stop();
    receiver.closeAllConnections();
    await new Promise<void>((resolve) => receiver.close(() => resolve()));
  }
});
