// A payment's `metadata`: the body carries it only when given; against a real
// `chargeonce serve` it is returned on the payment and on reads, it is part of
// the request (the same key with other metadata is KeyReusedError), and a
// key over 40 characters is `invalid_request` naming the field.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { Client, IdempotencyKey, KeyReusedError, ProblemError, amount, paymentBody } from "../src/index.js";
import { haveBinary, startServer, SECRET, SHOP, type Server } from "./harness.js";

const METADATA = { order_id: "6735", customer: "cus_42", note: "привет" };
const AMOUNT = amount("15.00", "RUB");

test("the body carries metadata only when given", () => {
  const plain = paymentBody({ amount: AMOUNT, reference: "o", token: "tok_ok" });
  assert.ok(!plain.includes("metadata"));
  const tagged = paymentBody({ amount: AMOUNT, reference: "o", token: "tok_ok", metadata: { a: "1" } });
  assert.ok(tagged.includes('"metadata":{"a":"1"}'));
});

let server: Server | null = null;
before(async () => {
  if (haveBinary()) server = await startServer([]);
});
after(async () => {
  await server?.stop();
});

test("metadata is sent, returned, and part of the request", { timeout: 60_000 }, async (t) => {
  if (server === null) {
    t.skip("no chargeonce binary (set CHARGEONCE_BIN)");
    return;
  }
  const client = new Client(server.url, SHOP, SECRET, { retry: { budgetMs: 10_000 } });
  const ref = `metadata-${randomBytes(4).toString("hex")}`;
  const key = IdempotencyKey.forOperation(ref, "pay");
  const paid = await client.pay(key, { amount: AMOUNT, reference: ref, token: "tok_ok", metadata: METADATA });
  assert.equal(paid.outcome.kind, "paid");
  if (paid.outcome.kind !== "paid") return;
  assert.deepEqual(paid.outcome.payment.metadata, METADATA);
  assert.deepEqual((await client.payment(paid.outcome.payment.id)).metadata, METADATA);
  await assert.rejects(
    client.pay(key, { amount: AMOUNT, reference: ref, token: "tok_ok", metadata: { ...METADATA, note: "другое" } }),
    KeyReusedError,
  );
  const other = `${ref}-b`;
  await assert.rejects(
    client.pay(IdempotencyKey.forOperation(other, "pay"), {
      amount: AMOUNT,
      reference: other,
      token: "tok_ok",
      metadata: { ["k".repeat(41)]: "v" },
    }),
    (error: unknown) =>
      error instanceof ProblemError &&
      error.code === "invalid_request" &&
      (error.problem.field ?? "").startsWith("metadata."),
  );
});
