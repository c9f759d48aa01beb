// Test mode: `livemode` on the models (absent is live: an answer stored
// before test mode existed), then against a real `chargeonce serve`: the
// shop's live key and a test key (`sk_test_...`, made with `chargeonce shops
// keys add --mode test` in the server's store) pay with the same idempotency
// key and the same order reference: two payments, `livemode` true and false,
// and each key's look-up of the other mode's payment is 404 `not_found`. A
// test key's webhook endpoint is a test one, live mode does not list it, and
// the event it receives says `"livemode": false`.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import http from "node:http";
import {
  Client,
  IdempotencyKey,
  ProblemError,
  SIGNATURE_HEADER,
  amount,
  livemodeOf,
  parseWebhook,
  type Capture,
  type MerchantEvent,
  type Payment,
  type Refund,
  type WebhookEndpoint,
} from "../src/index.js";
import { haveBinary, makeKey, startServer, SECRET, SHOP, type Server } from "./harness.js";

const fast = { baseDelayMs: 20, maxDelayMs: 200, budgetMs: 10_000 };
/** How long a delivery may take (the relay runs every 200 ms here). */
const DELIVERY_TIMEOUT_MS = 30_000;

const RUB = (value: string) => ({ value, currency: "RUB" });
const PAYMENT: Payment = {
  id: "pay_1",
  object: "payment",
  shop_id: "s",
  status: "succeeded",
  amount: RUB("15.00"),
  reference: "order-1",
  provider_payment_id: null,
  decline_code: null,
  created_at: "2026-12-06T00:00:00.000Z",
  amount_refunded: RUB("0.00"),
  refund_status: "none",
};
const REFUND: Refund = {
  id: "re_1",
  object: "refund",
  payment_id: "pay_1",
  shop_id: "s",
  status: "succeeded",
  amount: RUB("15.00"),
  provider_refund_id: null,
  failure_code: null,
  created_at: "2026-12-06T00:00:01.000Z",
};
const CAPTURE: Capture = {
  id: "cap_1",
  object: "capture",
  payment_id: "pay_1",
  shop_id: "s",
  status: "succeeded",
  amount: RUB("15.00"),
  final: true,
  provider_capture_id: null,
  failure_code: null,
  created_at: "2026-12-06T00:00:01.000Z",
};
const ENDPOINT = {
  id: "we_1",
  object: "webhook_endpoint",
  url: "https://shop.example/hooks",
  enabled_events: ["*"],
  description: null,
  enabled: true,
  managed_by_operator: false,
  created_at: "2026-12-06T00:00:00.000Z",
  previous_secret_expires_at: null,
} as WebhookEndpoint;
const EVENT: MerchantEvent = { id: "evt_1", type: "payment.succeeded", created: 1_765_000_000_000, data: {} };

test("livemode is read as sent, and an object without it is live", () => {
  for (const object of [PAYMENT, REFUND, CAPTURE, ENDPOINT, EVENT]) {
    assert.equal(object.livemode, undefined);
    assert.equal(livemodeOf(object), true, `${JSON.stringify(object)}`);
    assert.equal(livemodeOf({ ...object, livemode: true }), true);
    assert.equal(livemodeOf({ ...object, livemode: false }), false);
  }
});

// -- against a server -----------------------------------------------------------

let server: Server | undefined;
before(async () => {
  if (haveBinary()) server = await startServer(["--relay-interval", "200ms"]);
});
after(async () => {
  await server?.stop();
});

const unique = (label: string): string => `${label}-${randomBytes(6).toString("hex")}`;

async function refusal(promise: Promise<unknown>): Promise<[number, string]> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof ProblemError) return [error.status, error.code];
    throw error;
  }
  throw new Error("expected a refusal");
}

interface Delivery {
  headers: http.IncomingHttpHeaders;
  raw: Buffer;
}

async function receiver(): Promise<{ url: string; got: Delivery[]; close(): void }> {
  const got: Delivery[] = [];
  const httpd = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      got.push({ headers: req.headers, raw: Buffer.concat(chunks) });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => httpd.listen(0, "127.0.0.1", resolve));
  const address = httpd.address();
  assert.ok(address !== null && typeof address !== "string");
  return { url: `http://127.0.0.1:${address.port}/test-hooks`, got, close: () => httpd.close() };
}

function paid(outcome: { kind: string; payment?: Payment }): Payment {
  assert.equal(outcome.kind, "paid", JSON.stringify(outcome));
  assert.ok(outcome.payment !== undefined);
  return outcome.payment;
}

test("the same key and order pay once in each mode; each mode sees only its own", async (t) => {
  if (server === undefined) {
    t.skip("no chargeonce binary (set CHARGEONCE_BIN)");
    return;
  }
  const testSecret = makeKey(server, "test");
  assert.match(testSecret, /^sk_test_/);
  const live = new Client(server.url, SHOP, SECRET, { retry: fast });
  const tested = new Client(server.url, SHOP, testSecret, { retry: fast });
  const hooks = await receiver();
  try {
    // A test key's endpoint is test mode's: live mode does not list it.
    const made = await tested.createWebhookEndpoint(IdempotencyKey.forOperation(unique("test-endpoint"), "make"), {
      url: hooks.url,
      enabledEvents: ["payment.succeeded"],
    });
    const endpoint = made.endpoint;
    assert.equal(endpoint.livemode, false);
    const secret = endpoint.secret;
    assert.ok(typeof secret === "string" && secret.length > 0);
    assert.deepEqual((await tested.listWebhookEndpoints()).map((e) => e.id), [endpoint.id]);
    assert.ok(!(await live.listWebhookEndpoints()).some((e) => e.id === endpoint.id));

    const reference = unique("test-mode");
    const key = IdempotencyKey.forOperation(reference, "pay");
    const request = { amount: amount("15.00", "RUB"), reference, token: "tok_ok" };
    const livePayment = paid((await live.pay(key, request)).outcome);
    const testPayment = paid((await tested.pay(key, request)).outcome);
    assert.notEqual(livePayment.id, testPayment.id, "two payments");
    assert.deepEqual([livePayment.livemode, testPayment.livemode], [true, false]);
    assert.deepEqual([livemodeOf(livePayment), livemodeOf(testPayment)], [true, false]);
    assert.equal(testPayment.reference, reference);
    assert.equal(testPayment.shop_id, SHOP, "the shop's own id in either mode");

    // Each key reads its own mode's payment, and not the other's.
    assert.equal((await live.payment(livePayment.id)).livemode, true);
    assert.equal((await tested.payment(testPayment.id)).livemode, false);
    assert.deepEqual(await refusal(live.payment(testPayment.id)), [404, "not_found"]);
    assert.deepEqual(await refusal(tested.payment(livePayment.id)), [404, "not_found"]);
    assert.deepEqual((await tested.paymentsFor(reference)).map((p) => p.id), [testPayment.id]);
    assert.deepEqual((await live.paymentsFor(reference)).map((p) => p.id), [livePayment.id]);

    // The test endpoint receives the test payment's event, which says its mode.
    const deadline = Date.now() + DELIVERY_TIMEOUT_MS;
    let event: MerchantEvent | undefined;
    while (event === undefined) {
      for (const delivery of hooks.got.splice(0)) {
        const header = delivery.headers[SIGNATURE_HEADER];
        const received = parseWebhook(secret, Array.isArray(header) ? header.join(",") : header, delivery.raw);
        const payment = received.data["payment"] as { id?: string } | undefined;
        if (payment?.id === testPayment.id) event = received;
      }
      if (event === undefined) {
        assert.ok(Date.now() < deadline, `no event of ${testPayment.id} in ${DELIVERY_TIMEOUT_MS} ms`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
    assert.equal(event.type, "payment.succeeded");
    assert.equal(event.livemode, false, JSON.stringify(event));
    assert.equal(livemodeOf(event), false);
  } finally {
    hooks.close();
  }
});
