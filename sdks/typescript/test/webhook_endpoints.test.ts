// The shop's webhook endpoints (`/v1/webhook-endpoints`): the bodies and how
// a make's answers are judged (a fake fetch); then against a real
// `chargeonce serve`: an endpoint is made (its secret once; a repeat under the
// same key is the same endpoint without it), listed, read, changed, its
// secret rolled, and deleted; two endpoints with different `enabledEvents`
// each receive exactly the event types they asked for, signed with their own
// secret; a secret roll with an overlap puts two signatures on a delivery,
// each verifiable with `verifyWebhook`.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import http from "node:http";
import {
  Client,
  IdempotencyKey,
  KeyReusedError,
  ProblemError,
  SIGNATURE_HEADER,
  SignatureError,
  amount,
  createWebhookEndpointBody,
  rollWebhookEndpointSecretBody,
  updateWebhookEndpointBody,
  verifyWebhook,
  type WebhookEndpoint,
} from "../src/index.js";
import { haveBinary, startServer, SECRET, SHOP, type Server } from "./harness.js";

const fast = { baseDelayMs: 20, maxDelayMs: 200, budgetMs: 10_000 };
/** How long a delivery may take (the relay runs every 200 ms here). */
const DELIVERY_TIMEOUT_MS = 30_000;

function endpointJson(extra: Record<string, unknown> = {}): WebhookEndpoint {
  return {
    id: "we_01a2297968c07d11b0f4c7e8e0d6a3b1",
    object: "webhook_endpoint",
    url: "https://shop.example/hooks",
    enabled_events: ["payment.succeeded"],
    description: null,
    enabled: true,
    managed_by_operator: false,
    created_at: "2026-12-06T10:00:00.000Z",
    previous_secret_expires_at: null,
    ...extra,
  } as WebhookEndpoint;
}

interface Sent {
  url: string;
  method: string;
  key: string | null;
  body: string;
}

function fakeClient(answers: Response[]): { client: Client; sent: Sent[] } {
  const sent: Sent[] = [];
  const client = new Client("http://example.invalid", "demo", "sk", {
    retry: fast,
    fetch: (async (input: string | URL | Request, init?: RequestInit) => {
      const headers = new Headers(init?.headers);
      sent.push({ url: String(input), method: init?.method ?? "GET", key: headers.get("idempotency-key"), body: String(init?.body) });
      return answers.shift() ?? new Response("down", { status: 503 });
    }) as typeof fetch,
    sleep: async () => undefined,
  });
  return { client, sent };
}

const problem = (status: number, code: string): Response =>
  new Response(JSON.stringify({ type: `urn:chargeonce:problem:${code}`, title: "t", status, detail: "d", code }), {
    status,
    headers: { "content-type": "application/problem+json" },
  });

test("the bodies of a make, an update and a roll", () => {
  assert.equal(createWebhookEndpointBody({ url: "https://x.example/h", enabledEvents: ["*"] }), '{"url":"https://x.example/h","enabled_events":["*"]}');
  assert.deepEqual(JSON.parse(createWebhookEndpointBody({ url: "https://x.example/h", enabledEvents: ["payment.succeeded"], description: "orders" })), {
    url: "https://x.example/h",
    enabled_events: ["payment.succeeded"],
    description: "orders",
  });
  assert.equal(updateWebhookEndpointBody({ enabled: false }), '{"enabled":false}');
  assert.deepEqual(JSON.parse(updateWebhookEndpointBody({ enabledEvents: ["*"], enabled: true, description: "" })), {
    enabled_events: ["*"],
    enabled: true,
    description: "",
  });
  assert.equal(rollWebhookEndpointSecretBody({}), "{}");
  assert.equal(rollWebhookEndpointSecretBody({ expireOldInSeconds: 0 }), '{"expire_old_in_seconds":0}');
});

test("a make is retried with the same key and bytes; the limit is a refusal; a delete is a DELETE", async () => {
  const replay = new Response(JSON.stringify(endpointJson()), {
    status: 201,
    headers: { "content-type": "application/json", "idempotent-replayed": "true" },
  });
  const { client, sent } = fakeClient([problem(503, "store_unavailable"), replay]);
  const made = await client.createWebhookEndpoint("make-1", { url: "https://shop.example/hooks", enabledEvents: ["payment.succeeded"] });
  assert.equal(made.replayed, true);
  assert.equal(made.endpoint.secret ?? null, null);
  assert.equal(sent.length, 2);
  assert.equal(sent[0]!.body, sent[1]!.body);
  assert.deepEqual(new Set(sent.map((s) => s.key)), new Set(["make-1"]));
  assert.equal(sent[0]!.url, "http://example.invalid/v1/webhook-endpoints");

  const limited = fakeClient([problem(409, "webhook_endpoint_limit_reached")]);
  await assert.rejects(
    limited.client.createWebhookEndpoint("make-2", { url: "https://shop.example/hooks", enabledEvents: ["*"] }),
    (e: unknown) => e instanceof ProblemError && e.code === "webhook_endpoint_limit_reached",
  );
  assert.equal(limited.sent.length, 1);

  const deleting = fakeClient([new Response(JSON.stringify(endpointJson()), { status: 200, headers: { "content-type": "application/json" } })]);
  const deleted = await deleting.client.deleteWebhookEndpoint("we_1");
  assert.equal(deleted.id, "we_01a2297968c07d11b0f4c7e8e0d6a3b1");
  assert.deepEqual([deleting.sent[0]!.method, deleting.sent[0]!.url, deleting.sent[0]!.key], ["DELETE", "http://example.invalid/v1/webhook-endpoints/we_1", null]);
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

test("an endpoint is made, replayed, listed, changed, rolled and deleted against a server", async (t) => {
  if (server === undefined) {
    t.skip("no chargeonce binary (set CHARGEONCE_BIN)");
    return;
  }
  const client = new Client(server.url, SHOP, SECRET, { retry: fast });
  const url = "http://127.0.0.1:9/orders";
  const make = IdempotencyKey.forOperation(unique("orders-ep"), "make");
  const request = { url, enabledEvents: ["refund.succeeded", "payment.succeeded"], description: "orders" };
  const made = await client.createWebhookEndpoint(make, request);
  const endpoint = made.endpoint;
  assert.match(endpoint.id, /^we_/);
  assert.deepEqual(endpoint.enabled_events, ["payment.succeeded", "refund.succeeded"], "sorted");
  assert.equal(endpoint.url, url);
  assert.equal(endpoint.description, "orders");
  assert.equal(endpoint.enabled, true);
  assert.equal(endpoint.managed_by_operator, false);
  assert.equal(made.replayed, false);
  assert.match(endpoint.secret ?? "", /^whsec_/, "the secret, once");

  // The same make again: the same endpoint, no secret, nothing made.
  const again = await client.createWebhookEndpoint(make, request);
  assert.equal(again.endpoint.id, endpoint.id);
  assert.equal(again.endpoint.secret ?? null, null);
  assert.equal(again.replayed, true);
  await assert.rejects(client.createWebhookEndpoint(make, { url, enabledEvents: ["*"] }), KeyReusedError);

  const listed = await client.listWebhookEndpoints();
  assert.equal(listed.filter((e) => e.id === endpoint.id).length, 1);
  assert.ok(listed.every((e) => (e.secret ?? null) === null));
  const read = await client.webhookEndpoint(endpoint.id);
  assert.deepEqual([read.id, read.secret ?? null, read.created_at], [endpoint.id, null, endpoint.created_at]);

  const paused = await client.updateWebhookEndpoint(endpoint.id, IdempotencyKey.forOperation(endpoint.id, "pause"), { enabled: false });
  assert.equal(paused.endpoint.enabled, false);
  assert.deepEqual(paused.endpoint.enabled_events, endpoint.enabled_events);
  assert.equal(paused.endpoint.description, "orders");
  const changed = await client.updateWebhookEndpoint(endpoint.id, IdempotencyKey.forOperation(endpoint.id, "change"), {
    enabledEvents: ["payment.declined"],
    enabled: true,
    description: "",
  });
  assert.deepEqual(changed.endpoint.enabled_events, ["payment.declined"]);
  assert.equal(changed.endpoint.enabled, true);
  assert.equal(changed.endpoint.description, null, '"" clears it');
  assert.deepEqual(
    await refusal(client.updateWebhookEndpoint(endpoint.id, IdempotencyKey.forOperation(endpoint.id, "bad"), { enabledEvents: ["payment.exploded"] })),
    [422, "invalid_request"],
  );

  const roll = IdempotencyKey.forOperation(endpoint.id, "roll-1");
  const rolled = await client.rollWebhookEndpointSecret(endpoint.id, roll, { expireOldInSeconds: 3600 });
  assert.equal(rolled.endpoint.id, endpoint.id);
  assert.equal(rolled.replayed, false);
  assert.match(rolled.endpoint.secret ?? "", /^whsec_/);
  assert.notEqual(rolled.endpoint.secret, endpoint.secret);
  assert.equal(typeof rolled.endpoint.previous_secret_expires_at, "string");
  const replayed = await client.rollWebhookEndpointSecret(endpoint.id, roll, { expireOldInSeconds: 3600 });
  assert.deepEqual([replayed.endpoint.id, replayed.endpoint.secret ?? null, replayed.replayed], [endpoint.id, null, true]);

  const deleted = await client.deleteWebhookEndpoint(endpoint.id);
  assert.equal(deleted.id, endpoint.id);
  assert.equal(deleted.secret ?? null, null);
  assert.deepEqual(await refusal(client.deleteWebhookEndpoint(endpoint.id)), [404, "not_found"]);
  assert.deepEqual(await refusal(client.webhookEndpoint(endpoint.id)), [404, "not_found"]);
  assert.ok((await client.listWebhookEndpoints()).every((e) => e.id !== endpoint.id));
});

// -- deliveries -------------------------------------------------------------------

interface Delivery {
  headers: http.IncomingHttpHeaders;
  raw: Buffer;
}

/** A merchant's receiver on loopback: answers 204 and keeps every delivery. */
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
  return { url: `http://127.0.0.1:${address.port}/hook`, got, close: () => httpd.close() };
}

interface EventView {
  id: string;
  type: string;
  payment_id: string;
  deliveries: Array<{ endpoint_id: string; state: string }>;
}

/** The shop's events about these payments (`GET /v1/events`, raw: the SDK has no events API). */
async function eventsOf(base: string, paymentIds: ReadonlySet<string>): Promise<EventView[]> {
  const answer = await fetch(`${base}/v1/events?limit=100`, {
    headers: { authorization: `Basic ${Buffer.from(`${SHOP}:${SECRET}`).toString("base64")}` },
  });
  assert.equal(answer.status, 200);
  const list = (await answer.json()) as { data: EventView[] };
  return list.data.filter((e) => paymentIds.has(e.payment_id));
}

/** Polls until `count` events of these payments exist and every delivery of each is `delivered`. */
async function waitDelivered(base: string, paymentIds: ReadonlySet<string>, count: number): Promise<EventView[]> {
  const deadline = Date.now() + DELIVERY_TIMEOUT_MS;
  for (;;) {
    const events = await eventsOf(base, paymentIds);
    const done = events.length === count && events.every((e) => e.deliveries.length > 0 && e.deliveries.every((d) => d.state === "delivered"));
    if (done) return events;
    if (Date.now() > deadline) throw new Error(`not all delivered in ${DELIVERY_TIMEOUT_MS} ms: ${JSON.stringify(events).slice(0, 3000)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Polls until `got` holds a delivery about the payment with `reference`. */
async function deliveryOf(got: Delivery[], reference: string): Promise<Delivery> {
  const deadline = Date.now() + DELIVERY_TIMEOUT_MS;
  for (;;) {
    const found = got.find((d) => (JSON.parse(d.raw.toString("utf8")) as { data: { payment?: { reference?: string } } }).data.payment?.reference === reference);
    if (found !== undefined) return found;
    if (Date.now() > deadline) throw new Error(`no delivery for ${reference} in ${DELIVERY_TIMEOUT_MS} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

function signatureOf(delivery: Delivery): string {
  return String(delivery.headers[SIGNATURE_HEADER] ?? "");
}

function rejects(secret: string, delivery: Delivery): boolean {
  try {
    verifyWebhook(secret, signatureOf(delivery), delivery.raw);
  } catch (error) {
    if (error instanceof SignatureError) return true;
    throw error;
  }
  return false;
}

test("two endpoints with different enabledEvents each receive exactly the types they asked for", { timeout: 90_000 }, async (t) => {
  if (server === undefined) {
    t.skip("no chargeonce binary (set CHARGEONCE_BIN)");
    return;
  }
  const orders = await receiver();
  const declines = await receiver();
  try {
    const client = new Client(server.url, SHOP, SECRET, { retry: fast });
    const ordersEp = (
      await client.createWebhookEndpoint(IdempotencyKey.forOperation(unique("orders"), "make"), {
        url: orders.url,
        enabledEvents: ["payment.succeeded", "refund.succeeded"],
      })
    ).endpoint;
    const declinesEp = (
      await client.createWebhookEndpoint(IdempotencyKey.forOperation(unique("declines"), "make"), {
        url: declines.url,
        enabledEvents: ["payment.declined"],
      })
    ).endpoint;
    assert.ok(typeof ordersEp.secret === "string" && typeof declinesEp.secret === "string");
    try {
      const paidRef = unique("paid");
      const declinedRef = unique("declined");
      const paid = await client.pay(IdempotencyKey.forOperation(paidRef, "pay"), { amount: amount("15.00", "RUB"), reference: paidRef, token: "tok_ok" });
      assert.equal(paid.outcome.kind, "paid");
      const declined = await client.pay(IdempotencyKey.forOperation(declinedRef, "pay"), {
        amount: amount("16.00", "RUB"),
        reference: declinedRef,
        token: "tok_declined",
      });
      assert.equal(declined.outcome.kind, "declined");
      assert.ok(paid.outcome.kind === "paid" && declined.outcome.kind === "declined");
      const refund = await client.refund(paid.outcome.payment.id, IdempotencyKey.forOperation(paidRef, "refund-1"));
      assert.equal(refund.outcome.kind, "refunded");

      const events = await waitDelivered(server.url, new Set([paid.outcome.payment.id, declined.outcome.payment.id]), 3);
      const byType = new Map(events.map((e) => [e.type, e]));
      assert.deepEqual([...byType.keys()].sort(), ["payment.declined", "payment.succeeded", "refund.succeeded"]);
      // Each event was written with a delivery to exactly the endpoint that wants it.
      assert.deepEqual(byType.get("payment.succeeded")!.deliveries.map((d) => d.endpoint_id), [ordersEp.id]);
      assert.deepEqual(byType.get("refund.succeeded")!.deliveries.map((d) => d.endpoint_id), [ordersEp.id]);
      assert.deepEqual(byType.get("payment.declined")!.deliveries.map((d) => d.endpoint_id), [declinesEp.id]);

      // And each receiver got exactly those (at least once: by event id), signed with its own secret only.
      const cases: Array<[Delivery[], string, string, string[]]> = [
        [orders.got, ordersEp.secret, declinesEp.secret, ["payment.succeeded", "refund.succeeded"]],
        [declines.got, declinesEp.secret, ordersEp.secret, ["payment.declined"]],
      ];
      for (const [got, secret, other, wanted] of cases) {
        assert.ok(got.length > 0, "nothing received");
        const ids = new Map<string, string>();
        for (const delivery of got) {
          verifyWebhook(secret, signatureOf(delivery), delivery.raw);
          assert.ok(rejects(other, delivery), "not signed with the other endpoint's secret");
          const event = JSON.parse(delivery.raw.toString("utf8")) as { id: string; type: string };
          assert.equal(delivery.headers["chargeonce-event-type"], event.type);
          ids.set(event.id, event.type);
        }
        assert.deepEqual(new Map([...ids].sort()), new Map(wanted.map((type) => [byType.get(type)!.id, type] as [string, string]).sort()));
      }
    } finally {
      await client.deleteWebhookEndpoint(ordersEp.id);
      await client.deleteWebhookEndpoint(declinesEp.id);
    }
  } finally {
    orders.close();
    declines.close();
  }
});

test("a secret roll puts two signatures on a delivery during the overlap, each verifies", { timeout: 90_000 }, async (t) => {
  if (server === undefined) {
    t.skip("no chargeonce binary (set CHARGEONCE_BIN)");
    return;
  }
  const hook = await receiver();
  const client = new Client(server.url, SHOP, SECRET, { retry: fast });
  const payAndReceive = async (): Promise<Delivery> => {
    const reference = unique("roll");
    const paid = await client.pay(IdempotencyKey.forOperation(reference, "pay"), { amount: amount("15.00", "RUB"), reference, token: "tok_ok" });
    assert.equal(paid.outcome.kind, "paid");
    return deliveryOf(hook.got, reference);
  };
  const made = await client.createWebhookEndpoint(IdempotencyKey.forOperation(unique("roll-ep"), "make"), {
    url: hook.url,
    enabledEvents: ["payment.succeeded"],
  });
  const id = made.endpoint.id;
  try {
    const old = made.endpoint.secret;
    assert.ok(typeof old === "string");
    const before = await payAndReceive();
    assert.equal(signatureOf(before).split("v1=").length - 1, 1);
    verifyWebhook(old, signatureOf(before), before.raw);

    const roll = IdempotencyKey.forOperation(id, "roll-1");
    const rolled = await client.rollWebhookEndpointSecret(id, roll, { expireOldInSeconds: 3600 });
    const next = rolled.endpoint.secret;
    assert.ok(typeof next === "string" && next !== old);
    assert.equal(typeof rolled.endpoint.previous_secret_expires_at, "string");
    const replay = await client.rollWebhookEndpointSecret(id, roll, { expireOldInSeconds: 3600 });
    assert.deepEqual([replay.endpoint.secret ?? null, replay.replayed], [null, true], "a repeat rolls nothing");

    // During the overlap: one signature per secret, each verifies.
    const during = await payAndReceive();
    assert.equal(signatureOf(during).split("v1=").length - 1, 2, signatureOf(during));
    verifyWebhook(old, signatureOf(during), during.raw);
    verifyWebhook(next, signatureOf(during), during.raw);

    // A roll with no overlap: only the newest signs.
    const newest = (await client.rollWebhookEndpointSecret(id, IdempotencyKey.forOperation(id, "roll-2"), { expireOldInSeconds: 0 })).endpoint.secret;
    assert.ok(typeof newest === "string");
    const after = await payAndReceive();
    assert.equal(signatureOf(after).split("v1=").length - 1, 1, signatureOf(after));
    verifyWebhook(newest, signatureOf(after), after.raw);
    assert.ok(rejects(next, after) && rejects(old, after), "a replaced secret no longer verifies");
  } finally {
    await client.deleteWebhookEndpoint(id);
    hook.close();
  }
});
