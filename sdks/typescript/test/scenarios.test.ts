// The shared conformance scenarios (<repo>/sdks/scenarios/*.json, format in
// its README.md) against a real `chargeonce serve`, through a fault proxy
// where a scenario loses answers; then the simulator's ledger: at most one
// succeeded charge per order; and, where there is a proxy, what it recorded:
// every retry carried the same key, method, path and body bytes, and at least
// one key was sent more than once (a proxied scenario that caused no retry
// proves nothing).
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import {
  Client,
  IdempotencyKey,
  KeyReusedError,
  PaymentNotCancelableError,
  ProblemError,
  ChargeonceError,
  type Amount,
  type Attempt,
  type Capture,
  type Ledger,
  type Payment,
  type Refund,
  type RetryPolicy,
} from "../src/index.js";
import { REPO_DIR } from "./paths.js";
import { checkSameBytesPerKey, haveBinary, startProxy, startServer, SECRET, SHOP, type LoseRule, type Server } from "./harness.js";

const DIR = join(REPO_DIR, "sdks", "scenarios");

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
interface Step {
  do: string;
  id?: string;
  order?: string;
  operation?: string;
  amount?: Amount;
  token?: string;
  payment_of?: string;
  limit?: number;
  final?: boolean;
  calls?: Step[];
  stagger_ms?: number;
  expect?: Record<string, Json>;
}
interface Scenario {
  name: string;
  description: string;
  server: { args: string[] };
  faults?: { lose_answers?: Array<{ method: string; path: string; order?: string; operation?: string; count?: number }> };
  client?: Partial<Record<"budget_ms" | "attempt_timeout_ms" | "base_delay_ms" | "max_delay_ms" | "max_attempts", number>> & {
    prefer_wait_s?: number | null;
  };
  steps: Step[];
  ledger: { succeeded_charges: Record<string, number> };
}

/** What a step produced, for its expectations and later steps. */
interface Result {
  outcome?: string;
  error?: unknown;
  attempts?: Attempt[];
  replayed?: boolean;
  foundBeforePaying?: boolean;
  status?: number;
  errorCode?: string;
  payment?: Payment | null;
  paymentId?: string | null;
  uncertainId?: string | null;
  refund?: Refund | null;
  capture?: Capture | null;
  /** A capture's or void's refusal before executing: its problem's code and status. */
  refusal?: { code: string; status: number };
  resource?: unknown;
  count?: number;
}

const files = existsSync(DIR) ? readdirSync(DIR).filter((f) => f.endsWith(".json")).sort() : [];
const servers = new Map<string, Promise<Server>>();
after(async () => {
  for (const s of servers.values()) await (await s).stop();
});

function serverFor(args: string[]): Promise<Server> {
  const id = JSON.stringify(args);
  let s = servers.get(id);
  if (s === undefined) {
    s = startServer(args);
    servers.set(id, s);
  }
  return s;
}

function policyOf(client: Scenario["client"]): Partial<RetryPolicy> {
  const c = client ?? {};
  const p: { -readonly [K in keyof RetryPolicy]?: RetryPolicy[K] } = {};
  if (c.budget_ms !== undefined) p.budgetMs = c.budget_ms;
  if (c.attempt_timeout_ms !== undefined) p.attemptTimeoutMs = c.attempt_timeout_ms;
  if (c.base_delay_ms !== undefined) p.baseDelayMs = c.base_delay_ms;
  if (c.max_delay_ms !== undefined) p.maxDelayMs = c.max_delay_ms;
  if (c.max_attempts !== undefined) p.maxAttempts = c.max_attempts;
  if (c.prefer_wait_s !== undefined) p.preferWaitMs = c.prefer_wait_s === null ? null : c.prefer_wait_s * 1000;
  return p;
}

/** JSON equality, a subset for objects. */
function subset(want: Json, got: unknown): boolean {
  if (want !== null && typeof want === "object" && !Array.isArray(want)) {
    if (got === null || typeof got !== "object" || Array.isArray(got)) return false;
    return Object.entries(want).every(([k, v]) => subset(v, (got as Record<string, unknown>)[k]));
  }
  return JSON.stringify(want) === JSON.stringify(got);
}

if (files.length === 0 || !haveBinary()) {
  test("conformance scenarios", (t) => {
    t.skip(files.length === 0 ? `no scenarios in ${DIR}` : "no chargeonce binary (set CHARGEONCE_BIN)");
  });
}

for (const file of files) {
  test(`scenario ${file}`, { timeout: 120_000 }, async () => {
    const scenario = JSON.parse(readFileSync(join(DIR, file), "utf8")) as Scenario;
    assert.equal(`${file.replace(/^\d+_/, "").replace(/\.json$/, "")}`, scenario.name, "name = file name");
    const server = await serverFor(scenario.server.args);
    const runId = `ts-${scenario.name.replace(/_/g, "-")}-${randomBytes(3).toString("hex")}`;
    const reference = (order: string) => `${order}-${runId}`;
    const rules: LoseRule[] = (scenario.faults?.lose_answers ?? []).map((r) => {
      const rule: LoseRule = { method: r.method, path: r.path };
      if (r.order !== undefined) rule.key = IdempotencyKey.forOperation(reference(r.order), r.operation ?? "pay").value;
      if (r.count !== undefined) rule.count = r.count;
      return rule;
    });
    const proxy = scenario.faults !== undefined ? await startProxy(server.url, rules) : null;
    const client = new Client(proxy?.url ?? server.url, SHOP, SECRET, { retry: policyOf(scenario.client) });
    const results = new Map<string, Result>();
    const orders = new Set<string>(Object.keys(scenario.ledger.succeeded_charges));

    const keyOf = (step: Step, fallback: string) => {
      assert.ok(step.order !== undefined, "a keyed step names an order");
      orders.add(step.order);
      return IdempotencyKey.forOperation(reference(step.order), step.operation ?? fallback);
    };
    const paymentOf = (id: string | undefined): Payment => {
      const payment = id === undefined ? undefined : results.get(id)?.payment;
      assert.ok(payment, `step ${id} has a payment`);
      return payment;
    };

    async function run(step: Step): Promise<Result> {
      switch (step.do) {
        case "pay":
        case "pay_order":
        case "authorize": {
          const key = keyOf(step, "pay");
          const request = { amount: step.amount!, reference: reference(step.order!), token: step.token! };
          try {
            const r =
              step.do === "pay"
                ? await client.pay(key, request)
                : step.do === "authorize"
                  ? await client.authorize(key, request)
                  : await client.payOrder(key, request);
            const payment = r.outcome.kind === "uncertain" ? null : r.outcome.payment;
            return {
              outcome: r.outcome.kind,
              attempts: r.attempts,
              replayed: r.replayed,
              foundBeforePaying: r.foundBeforePaying,
              payment,
              paymentId: payment?.id ?? null,
              uncertainId: r.outcome.kind === "uncertain" ? (r.outcome.paymentId ?? null) : null,
              resource: payment,
            };
          } catch (error) {
            return { error };
          }
        }
        case "refund": {
          const key = keyOf(step, "");
          const payment = paymentOf(step.payment_of);
          try {
            const r = await client.refund(payment.id, key, step.amount === undefined ? {} : { amount: step.amount });
            const refund = r.outcome.kind === "uncertain" ? null : r.outcome.refund;
            const outcome = r.outcome.kind === "failed" ? "refund_failed" : r.outcome.kind;
            const replayed = r.attempts.at(-1)?.answer;
            return {
              outcome,
              attempts: r.attempts,
              replayed: replayed?.kind === "http" && replayed.replayed,
              refund,
              uncertainId: r.outcome.kind === "uncertain" ? (r.outcome.refundId ?? null) : null,
              resource: refund,
            };
          } catch (error) {
            return { error };
          }
        }
        case "cancel": {
          const key = keyOf(step, "");
          const payment = paymentOf(step.payment_of);
          try {
            const r = await client.cancel(payment.id, key);
            const ended = r.outcome.kind === "uncertain" ? null : r.outcome.payment;
            const last = r.attempts.at(-1)?.answer;
            return {
              outcome: r.outcome.kind,
              attempts: r.attempts,
              replayed: last?.kind === "http" && last.replayed,
              payment: ended,
              paymentId: ended?.id ?? null,
              uncertainId: r.outcome.kind === "uncertain" ? (r.outcome.paymentId ?? null) : null,
              resource: ended,
            };
          } catch (error) {
            return { error };
          }
        }
        case "capture": {
          const key = keyOf(step, "");
          const payment = paymentOf(step.payment_of);
          try {
            const request = { ...(step.amount === undefined ? {} : { amount: step.amount }), ...(step.final === undefined ? {} : { final: step.final }) };
            const r = await client.capture(payment.id, key, request);
            const o = r.outcome;
            const capture = o.kind === "captured" || o.kind === "failed" ? o.capture : null;
            return {
              outcome: o.kind === "failed" ? "capture_failed" : o.kind,
              attempts: r.attempts,
              replayed: r.replayed,
              capture,
              paymentId: capture?.payment_id ?? null,
              uncertainId: o.kind === "uncertain" ? (o.captureId ?? null) : null,
              ...(o.kind === "refused" ? { refusal: { code: o.code, status: o.status } } : {}),
              resource: o.kind === "refused" ? o.problem.raw : capture,
            };
          } catch (error) {
            return { error };
          }
        }
        case "void": {
          const key = keyOf(step, "");
          const payment = paymentOf(step.payment_of);
          try {
            const r = await client.void(payment.id, key);
            const o = r.outcome;
            const ended = o.kind === "voided" || o.kind === "released" || o.kind === "failed" ? o.payment : null;
            return {
              outcome: o.kind === "failed" ? "void_failed" : o.kind,
              attempts: r.attempts,
              replayed: r.replayed,
              payment: ended,
              paymentId: ended?.id ?? null,
              uncertainId: o.kind === "uncertain" ? (o.paymentId ?? null) : null,
              ...(o.kind === "refused" ? { refusal: { code: o.code, status: o.status } } : {}),
              resource: o.kind === "refused" ? o.problem.raw : ended,
            };
          } catch (error) {
            return { error };
          }
        }
        case "raw_pay": {
          const key = keyOf(step, "pay");
          const body = JSON.stringify({
            amount: { value: step.amount!.value, currency: step.amount!.currency },
            reference: reference(step.order!),
            payment_method: { token: step.token! },
          });
          const response = await fetch(new URL("/v1/payments", server.url), {
            method: "POST",
            headers: {
              authorization: "Basic " + Buffer.from(`${SHOP}:${SECRET}`).toString("base64"),
              "idempotency-key": key.value,
              "content-type": "application/json",
            },
            body,
          });
          const json = JSON.parse(await response.text()) as Record<string, unknown>;
          const payment = (typeof json["code"] === "string" ? json["payment"] : json) as Payment | undefined;
          return {
            status: response.status,
            replayed: response.headers.get("idempotent-replayed") === "true",
            errorCode: typeof json["code"] === "string" ? json["code"] : undefined,
            payment: payment ?? null,
            paymentId: payment?.id ?? null,
            resource: payment ?? json,
          } as Result;
        }
        case "get_key": {
          const key = keyOf(step, "pay");
          const info = await client.idempotencyKey(key);
          return { resource: info, paymentId: info.payment_id ?? null };
        }
        case "list_payments": {
          assert.ok(step.order !== undefined);
          orders.add(step.order);
          const all: Payment[] = [];
          const params = step.limit === undefined ? { reference: reference(step.order) } : { reference: reference(step.order), limit: step.limit };
          for await (const p of client.allPayments(params)) all.push(p);
          const only = all.length === 1 ? all[0]! : null;
          return { count: all.length, payment: only, paymentId: only?.id ?? null, resource: only };
        }
        case "list_refunds": {
          const payment = paymentOf(step.payment_of);
          const all: Refund[] = [];
          for await (const page of client.paymentRefundPages(payment.id, step.limit === undefined ? {} : { limit: step.limit })) all.push(...page.data);
          const only = all.length === 1 ? all[0]! : null;
          return { count: all.length, refund: only, resource: only };
        }
        case "list_captures": {
          const payment = paymentOf(step.payment_of);
          const all: Capture[] = [];
          for await (const c of client.allPaymentCaptures(payment.id, step.limit === undefined ? {} : { limit: step.limit })) all.push(c);
          const only = all.length === 1 ? all[0]! : null;
          return { count: all.length, capture: only, resource: only };
        }
        default:
          throw new Error(`unknown step kind ${step.do}`);
      }
    }

    function check(step: Step, index: string, r: Result): void {
      const expect = step.expect ?? {};
      const where = (member: string) => `${file} step ${index} (${step.do}${step.id ? ` ${step.id}` : ""}): ${member}`;
      const error = r.error;
      if (error !== undefined && !(error instanceof ChargeonceError)) throw error;
      if ("error_code" in expect && r.refusal !== undefined) {
        // A capture's or void's refusal before executing is its outcome
        // ("refused"), its code and status checked like a thrown problem's.
        assert.equal(r.refusal.code, expect["error_code"], where("error_code"));
        if ("status" in expect) assert.equal(r.refusal.status, expect["status"], where("status"));
      } else if ("error_code" in expect && step.do !== "raw_pay") {
        assert.ok(error instanceof ProblemError, `${where("error_code")}: expected ${String(expect["error_code"])}, got ${r.outcome}`);
        assert.equal(error.code, expect["error_code"], where("error_code"));
        if (expect["error_code"] === "idempotency_key_reused") assert.ok(error instanceof KeyReusedError, where("error_code: KeyReusedError"));
        if (expect["error_code"] === "payment_not_cancelable") {
          // Its own error, carrying the payment the cancel was about (already final).
          assert.ok(error instanceof PaymentNotCancelableError, where("error_code: PaymentNotCancelableError"));
          assert.ok(error.payment !== null && error.payment.status !== "pending", where("error_code: the payment, final"));
          if (step.payment_of !== undefined) assert.equal(error.payment.id, paymentOf(step.payment_of).id, where("error_code: the payment"));
        }
        if ("status" in expect) assert.equal(error.status, expect["status"], where("status"));
        if ("attempts" in expect) assert.equal(error.attempts, expect["attempts"], where("attempts"));
        return;
      }
      assert.equal(error, undefined, `${where("no error expected")}: ${String(error)}`);
      for (const [member, want] of Object.entries(expect)) {
        const attempts = r.attempts ?? [];
        if (r.refusal !== undefined && (member === "error_code" || member === "status")) continue;
        switch (member) {
          case "outcome":
            assert.equal(r.outcome, want, where(member));
            break;
          case "error_code":
            assert.equal(r.errorCode, want, where(member));
            break;
          case "status":
            assert.equal(r.status, want, where(member));
            break;
          case "attempts":
            assert.equal(attempts.length, want, where(member));
            break;
          case "min_attempts":
            assert.ok(attempts.length >= (want as number), `${where(member)}: ${attempts.length}`);
            break;
          case "first_status": {
            const first = attempts[0]?.answer;
            assert.ok(first?.kind === "http" && first.status === want, `${where(member)}: ${JSON.stringify(first)}`);
            break;
          }
          case "replayed":
            assert.equal(r.replayed, want, where(member));
            break;
          case "waited":
            assert.equal(attempts.some((a) => a.answer.kind === "http" && a.answer.waited), want, where(member));
            break;
          case "found_before_paying":
            assert.equal(r.foundBeforePaying, want, where(member));
            break;
          case "payment_id":
            if (want === null) assert.equal(r.uncertainId ?? null, null, where(member));
            else assert.ok(typeof (r.uncertainId ?? r.paymentId) === "string", where(member));
            break;
          case "same_payment_as": {
            const other = results.get(want as string);
            const mine = r.paymentId ?? r.payment?.id;
            assert.ok(mine !== undefined && mine !== null, where(member));
            assert.equal(mine, other?.paymentId ?? other?.payment?.id, where(member));
            break;
          }
          case "same_refund_as":
            assert.ok(r.refund, where(member));
            assert.equal(r.refund.id, results.get(want as string)?.refund?.id, where(member));
            break;
          case "same_capture_as":
            assert.ok(r.capture, where(member));
            assert.equal(r.capture.id, results.get(want as string)?.capture?.id, where(member));
            break;
          case "count":
            assert.equal(r.count, want, where(member));
            break;
          case "fields":
            assert.ok(subset(want, r.resource), `${where(member)}: ${JSON.stringify(r.resource)}`);
            break;
          default:
            throw new Error(where(`unknown expectation ${member}`));
        }
      }
    }

    try {
      for (const [i, step] of scenario.steps.entries()) {
        if (step.do === "concurrently") {
          const calls = step.calls ?? [];
          const pending: Promise<Result>[] = [];
          for (const [j, call] of calls.entries()) {
            if (j > 0) await new Promise((resolve) => setTimeout(resolve, step.stagger_ms ?? 0));
            pending.push(run(call));
          }
          const done = await Promise.all(pending);
          calls.forEach((call, j) => call.id !== undefined && results.set(call.id, done[j]!));
          calls.forEach((call, j) => check(call, `${i}.${j}`, done[j]!));
        } else {
          const r = await run(step);
          if (step.id !== undefined) results.set(step.id, r);
          check(step, String(i), r);
        }
      }
      const ledger = (await (await fetch(new URL("/sim/ledger", server.operatorUrl))).json()) as Ledger;
      for (const order of orders) {
        const succeeded = ledger.charges.filter((c) => c.reference === reference(order) && c.status === "succeeded").length;
        const want = scenario.ledger.succeeded_charges[order];
        if (want !== undefined) assert.equal(succeeded, want, `${file}: ledger, succeeded charges of ${order}`);
        assert.ok(succeeded <= 1, `${file}: order ${order} charged ${succeeded} times`);
      }
      if (proxy !== null && rules.length > 0) assert.ok(proxy.lost > 0, `${file}: the fault proxy lost no answer`);
      if (proxy !== null) {
        const perKey = checkSameBytesPerKey(proxy.requests, `${file}: fault proxy`);
        const retried = [...perKey.values()].some((n) => n > 1);
        assert.ok(retried, `${file}: no key went through the fault proxy more than once: ${JSON.stringify([...perKey])}`);
      }
    } finally {
      await proxy?.stop();
    }
  });
}
