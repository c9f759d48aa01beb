// The shop's API keys (`/v1/api-keys`): how a make's answers are judged (a
// fake fetch), then against a real `chargeonce serve`: a `read_only` key
// made with the shop's full key reads but may not POST (403
// `insufficient_scope`); the same make again answers the same key without
// its secret; a roll with no overlap hands over to the successor at once
// (the old key is 401 `api_key_expired`); a revoked key is 401
// `api_key_revoked`; a make whose answer is lost is retried with the same
// key and bytes and answered by the replay.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import {
  Client,
  IdempotencyKey,
  KeyReusedError,
  ProblemError,
  UnavailableError,
  amount,
  createApiKeyBody,
  rollApiKeyBody,
  type ApiKey,
} from "../src/index.js";
import { checkSameBytesPerKey, haveBinary, startProxy, startServer, SECRET, SHOP, type Server } from "./harness.js";

const fast = { baseDelayMs: 20, maxDelayMs: 200, budgetMs: 10_000 };

function keyJson(extra: Record<string, unknown> = {}): ApiKey {
  return {
    id: "key_01a2297968c07d11b0f4c7e8e0d6a3b1",
    object: "api_key",
    livemode: true,
    scope: "read_only",
    prefix: "sk_live_4f3a",
    description: null,
    state: "active",
    created_at: "2026-12-06T10:00:00.000Z",
    expires_at: null,
    revoked_at: null,
    last_used_at: null,
    ...extra,
  } as ApiKey;
}

interface Sent {
  url: string;
  key: string | null;
  body: string;
}

function fakeClient(answers: Response[], budgetMs = 10_000): { client: Client; sent: Sent[] } {
  const sent: Sent[] = [];
  const client = new Client("http://example.invalid", "demo", "sk", {
    retry: { ...fast, budgetMs },
    fetch: (async (input: string | URL | Request, init?: RequestInit) => {
      const headers = new Headers(init?.headers);
      sent.push({ url: String(input), key: headers.get("idempotency-key"), body: String(init?.body) });
      const next = answers.shift();
      return next ?? new Response("down", { status: 503 });
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

test("the bodies of a make and a roll", () => {
  assert.equal(createApiKeyBody({ scope: "read_only" }), '{"scope":"read_only"}');
  assert.deepEqual(JSON.parse(createApiKeyBody({ scope: "payments", description: "checkout", expiresAt: new Date("2027-01-01T00:00:00Z") })), {
    scope: "payments",
    description: "checkout",
    expires_at: "2027-01-01T00:00:00.000Z",
  });
  assert.equal(rollApiKeyBody({}), "{}");
  assert.equal(rollApiKeyBody({ expireOldInSeconds: 0 }), '{"expire_old_in_seconds":0}');
});

test("a make is retried with the same key and bytes; a limit is a refusal; no answer is UnavailableError", async () => {
  const replay = new Response(JSON.stringify(keyJson()), {
    status: 201,
    headers: { "content-type": "application/json", "idempotent-replayed": "true" },
  });
  const { client, sent } = fakeClient([problem(503, "store_unavailable"), replay]);
  const made = await client.createApiKey("make-1", { scope: "read_only", description: "support" });
  assert.equal(made.replayed, true);
  assert.equal(made.apiKey.secret ?? null, null);
  assert.equal(sent.length, 2);
  assert.equal(sent[0]!.body, sent[1]!.body);
  assert.deepEqual(new Set(sent.map((s) => s.key)), new Set(["make-1"]));
  assert.equal(sent[0]!.url, "http://example.invalid/v1/api-keys");

  const limited = fakeClient([problem(409, "api_key_limit_reached")]);
  await assert.rejects(limited.client.createApiKey("make-2", { scope: "full" }), (e: unknown) => e instanceof ProblemError && e.code === "api_key_limit_reached");
  assert.equal(limited.sent.length, 1);

  const down = fakeClient([], 1);
  await assert.rejects(down.client.revokeApiKey("key_1", "revoke-1"), UnavailableError);
  assert.equal(down.sent[0]!.url, "http://example.invalid/v1/api-keys/key_1/revoke");
});

// -- against a server -----------------------------------------------------------

let server: Server | undefined;
before(async () => {
  if (haveBinary()) server = await startServer();
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

test("keys are made, used, replayed, rolled and revoked against a server", async (t) => {
  if (server === undefined) {
    t.skip("no chargeonce binary (set CHARGEONCE_BIN)");
    return;
  }
  const full = new Client(server.url, SHOP, SECRET, { retry: fast });
  const make = IdempotencyKey.forOperation(unique("support"), "make-key");
  const made = await full.createApiKey(make, { scope: "read_only", description: "support tool" });
  assert.match(made.apiKey.id, /^key_/);
  assert.equal(made.apiKey.scope, "read_only");
  assert.equal(made.apiKey.state, "active");
  assert.equal(made.replayed, false);
  const secret = made.apiKey.secret;
  assert.ok(typeof secret === "string" && secret.length > 0, "the secret, once");

  const reader = new Client(server.url, SHOP, secret, { retry: fast });
  assert.equal((await reader.listPayments({ limit: 1 })).object, "list");
  const order = unique("read-only");
  assert.deepEqual(
    await refusal(reader.pay(IdempotencyKey.forOperation(order, "pay"), { amount: amount("10.00", "RUB"), reference: order, token: "tok_ok" })),
    [403, "insufficient_scope"],
  );

  const again = await full.createApiKey(make, { scope: "read_only", description: "support tool" });
  assert.equal(again.apiKey.id, made.apiKey.id);
  assert.equal(again.apiKey.secret ?? null, null);
  assert.equal(again.replayed, true);
  await assert.rejects(full.createApiKey(make, { scope: "payments" }), KeyReusedError);
  const listed = await full.listApiKeys();
  assert.equal(listed.filter((k) => k.id === made.apiKey.id).length, 1);
  assert.ok(listed.every((k) => (k.secret ?? null) === null));
  assert.equal((await full.apiKey(made.apiKey.id)).secret ?? null, null);

  const roll = IdempotencyKey.forOperation(made.apiKey.id, "roll-1");
  const successor = await full.rollApiKey(made.apiKey.id, roll, { expireOldInSeconds: 0 });
  assert.notEqual(successor.apiKey.id, made.apiKey.id);
  assert.equal(successor.apiKey.scope, "read_only");
  const nextSecret = successor.apiKey.secret;
  assert.ok(typeof nextSecret === "string" && nextSecret.length > 0);
  const rollAgain = await full.rollApiKey(made.apiKey.id, roll, { expireOldInSeconds: 0 });
  assert.deepEqual([rollAgain.apiKey.id, rollAgain.apiKey.secret ?? null, rollAgain.replayed], [successor.apiKey.id, null, true]);
  const next = new Client(server.url, SHOP, nextSecret, { retry: fast });
  await next.listPayments({ limit: 1 });
  assert.deepEqual(await refusal(reader.listPayments({ limit: 1 })), [401, "api_key_expired"]);
  assert.equal((await full.apiKey(made.apiKey.id)).state, "expired");
  assert.deepEqual(
    await refusal(full.rollApiKey(made.apiKey.id, IdempotencyKey.forOperation(made.apiKey.id, "roll-2"))),
    [409, "api_key_inactive"],
  );

  const revoke = IdempotencyKey.forOperation(successor.apiKey.id, "revoke");
  const revoked = await full.revokeApiKey(successor.apiKey.id, revoke);
  assert.equal(revoked.apiKey.state, "revoked");
  assert.ok(typeof revoked.apiKey.revoked_at === "string");
  assert.deepEqual(await refusal(next.listPayments({ limit: 1 })), [401, "api_key_revoked"]);
  const revokedAgain = await full.revokeApiKey(successor.apiKey.id, revoke);
  assert.equal(revokedAgain.apiKey.revoked_at, revoked.apiKey.revoked_at);
  assert.deepEqual(await refusal(full.apiKey("key_00000000000000000000000000000000")), [404, "not_found"]);
});

test("a make whose answer is lost is retried with the same key and bytes and answered by the replay", async (t) => {
  if (server === undefined) {
    t.skip("no chargeonce binary (set CHARGEONCE_BIN)");
    return;
  }
  const make = IdempotencyKey.forOperation(unique("lost"), "make-key");
  const proxy = await startProxy(server.url, [{ method: "POST", path: "/v1/api-keys", key: make.value, count: 1 }]);
  try {
    const client = new Client(proxy.url, SHOP, SECRET, { retry: fast });
    const made = await client.createApiKey(make, { scope: "payments" });
    // The first attempt made the key; its answer, with the secret, was lost.
    assert.equal(made.replayed, true);
    assert.equal(made.apiKey.secret ?? null, null);
    assert.equal(made.apiKey.scope, "payments");
    assert.equal(proxy.lost, 1);
    assert.equal(checkSameBytesPerKey(proxy.requests, "api keys").get(make.value), 2);
  } finally {
    await proxy.stop();
  }
});
