// The lifecycle's models: a payment's authorization members (and what an
// answer stored before they existed means), captures, and the problems that
// name them.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  CAPTURE_METHODS,
  PAYMENT_STATUSES,
  amountCapturable,
  amountCaptured,
  asCapture,
  asPayment,
  captureMethodOf,
  parseProblem,
  type Payment,
} from "../src/index.js";

const payment = (status: string, extra: Record<string, unknown> = {}): Payment =>
  ({
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
    ...extra,
  }) as Payment;
const capture = {
  id: "cap_1",
  object: "capture",
  payment_id: "pay_1",
  shop_id: "demo",
  status: "succeeded",
  amount: { value: "1000.00", currency: "RUB" },
  final: false,
  provider_capture_id: "cp_1",
  failure_code: null,
  created_at: "2026-12-05T00:00:01.000Z",
};

test("an authorization is read with its hold; every status of the contract is a payment's", () => {
  for (const status of PAYMENT_STATUSES) assert.equal(asPayment(payment(status))?.status, status);
  assert.deepEqual([...CAPTURE_METHODS], ["automatic", "manual"]);
  const held = payment("partially_captured", {
    capture_method: "manual",
    amount_capturable: { value: "500.00", currency: "RUB" },
    amount_captured: { value: "1000.00", currency: "RUB" },
    authorization_expires_at: "2026-12-12T00:00:00.000Z",
  });
  assert.equal(captureMethodOf(held), "manual");
  assert.deepEqual(amountCapturable(held), { value: "500.00", currency: "RUB" });
  assert.deepEqual(amountCaptured(held), { value: "1000.00", currency: "RUB" });
});

test("an answer stored before authorizations is a payment charged at once", () => {
  const succeeded = payment("succeeded");
  assert.equal(captureMethodOf(succeeded), "automatic");
  assert.deepEqual(amountCapturable(succeeded), { value: "0.00", currency: "RUB" });
  assert.deepEqual(amountCaptured(succeeded), { value: "1500.00", currency: "RUB" }, "charged at once and succeeded: its amount was taken");
  assert.deepEqual(amountCaptured(payment("declined")), { value: "0.00", currency: "RUB" });
  assert.deepEqual(amountCaptured(payment("pending", { amount_captured: null })), { value: "0.00", currency: "RUB" });
});

test("a capture is read; problems carry their capture", () => {
  assert.equal(asCapture(capture)?.id, "cap_1");
  assert.equal(asCapture({ ...capture, final: "no" }), null);
  assert.equal(asCapture(payment("succeeded")), null);
  const failed = parseProblem(422, JSON.stringify({ code: "capture_failed", status: 422, capture: { ...capture, status: "failed" }, failure_code: "do_not_honor" }));
  assert.ok(failed !== null && failed.known && failed.capture?.status === "failed");
  for (const code of ["capture_exceeds_capturable", "payment_not_capturable", "payment_not_voidable", "authorization_busy", "void_failed"]) {
    assert.equal(parseProblem(409, JSON.stringify({ code }))?.known, true, code);
  }
});
