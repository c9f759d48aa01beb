/**
 * The client: the platform `fetch`, one AbortSignal per attempt, and the
 * retry loops. Judgement (what an answer means, how long to wait) lives in
 * `outcome.ts` and `retry.ts`, without I/O.
 */
import { IdempotencyKey } from "./key.js";
import {
  captureBody,
  createApiKeyBody,
  createWebhookEndpointBody,
  rollWebhookEndpointSecretBody,
  updateWebhookEndpointBody,
  type CreateWebhookEndpoint,
  type RollWebhookEndpointSecret,
  type UpdateWebhookEndpoint,
  type WebhookEndpoint,
  rollApiKeyBody,
  type ApiKey,
  type CreateApiKey,
  type RollApiKey,
  paymentBody,
  refundBody,
  type Capture,
  type CreateCapture,
  type CreatePayment,
  type CreateRefund,
  type IdempotencyKeyInfo,
  type Ledger,
  type List,
  type Payment,
  type PaymentHistory,
  type PaymentStatus,
  type Refund,
} from "./model.js";
import {
  classifyFailure,
  isHeld,
  judgeApiKey,
  judgeWebhookEndpoint,
  judgePayment,
  judgeCancel,
  judgeCapture,
  judgeRefund,
  judgeVoid,
  problemOf,
  retryAfterOf,
  type Answer,
  type ApiKeyOutcome,
  type ApiKeyResult,
  type WebhookEndpointOutcome,
  type WebhookEndpointResult,
  type Attempt,
  type AttemptAnswer,
  type Judgement,
  type PayOutcome,
  type PayResult,
  type CancelOutcome,
  type CancelResult,
  type CaptureOutcome,
  type CaptureResult,
  type VoidOutcome,
  type VoidResult,
  type RefundOutcome,
  type RefundResult,
  answersRequest,
} from "./outcome.js";
import {
  OrderAlreadyPaidError,
  ProblemError,
  UnavailableError,
  UnexpectedAnswerError,
  type KeyReusedError,
  type PaymentNotCancelableError,
} from "./problem.js";
import { DEFAULT_RETRY_POLICY, delayMs, preferSeconds, transient, type RetryPolicy } from "./retry.js";

/** Paging of a list: at most one of `startingAfter` and `endingBefore`. */
export interface ListParams {
  /** 1 to 100 (the server's default: 10). */
  limit?: number;
  /** The page after (older than) this id. */
  startingAfter?: string;
  /** The page before (newer than) this id. */
  endingBefore?: string;
}

/** Paging and filters of `GET /v1/payments`. */
export interface PaymentListParams extends ListParams {
  status?: PaymentStatus;
  reference?: string;
  createdGte?: string;
  createdLt?: string;
}

export interface ClientOptions {
  /** The retry policy (see {@link RetryPolicy}); defaults to {@link DEFAULT_RETRY_POLICY}. */
  retry?: Partial<RetryPolicy>;
  /** The `fetch` to use (the platform's by default). */
  fetch?: typeof fetch;
  /** Milliseconds since the epoch (`Date.now` by default). */
  now?: () => number;
  /** A number in `[0, 1)` for the jitter (`Math.random` by default). */
  random?: () => number;
  /** How the client waits (`setTimeout` by default). */
  sleep?: (ms: number) => Promise<void>;
}

type KeyLike = IdempotencyKey | string;

function keyValue(key: KeyLike): string {
  return typeof key === "string" ? IdempotencyKey.of(key).value : key.value;
}

/** Options of one payment (or cancel) call. */
export interface PayOptions {
  /**
   * Ends the call when aborted (a deadline: `AbortSignal.timeout(ms)`, or the
   * caller's own): it resolves `{kind: "uncertain"}` if no definite answer came,
   * never rejects. Bound a payment with it, never with `Promise.race` or an
   * outer cancellation: an attempt may have been sent, and only "uncertain"
   * says so.
   */
  signal?: AbortSignal;
}

/** Options of one cancel call: like a payment's, `signal` ends it as `{kind: "uncertain"}`, never an error. */
export type CancelOptions = PayOptions;
/** Options of one capture call: `signal` ends it as `{kind: "uncertain"}`, never an error. */
export type CaptureOptions = PayOptions;
/** Options of one void call: `signal` ends it as `{kind: "uncertain"}`, never an error. */
export type VoidOptions = PayOptions;

/** `sleeping`, or less when `signal` aborts first. */
async function untilAborted(sleeping: Promise<void>, signal?: AbortSignal): Promise<void> {
  if (signal === undefined) return sleeping;
  if (signal.aborted) return;
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<void>((resolve) => {
    onAbort = () => resolve();
    signal.addEventListener("abort", onAbort, { once: true });
  });
  try {
    await Promise.race([sleeping, aborted]);
  } finally {
    if (onAbort !== undefined) signal.removeEventListener("abort", onAbort);
  }
}

/** A client of one chargeonce service, as one shop. The secret is never shown. */
export class Client {
  readonly policy: RetryPolicy;
  readonly #base: string;
  readonly #auth: string;
  readonly #fetch: typeof fetch;
  readonly #now: () => number;
  readonly #random: () => number;
  readonly #sleep: (ms: number) => Promise<void>;
  readonly shopId: string;

  constructor(baseUrl: string, shopId: string, secret: string, options: ClientOptions = {}) {
    this.#base = baseUrl.replace(/\/+$/, "") + "/";
    new URL(this.#base); // refuses a bad base URL now, not at the first call
    this.shopId = shopId;
    this.#auth = "Basic " + Buffer.from(`${shopId}:${secret}`, "utf8").toString("base64");
    this.policy = Object.freeze({ ...DEFAULT_RETRY_POLICY, ...options.retry });
    this.#fetch = options.fetch ?? ((input, init) => fetch(input, init));
    this.#now = options.now ?? Date.now;
    this.#random = options.random ?? Math.random;
    this.#sleep = options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
  }

  toString(): string {
    return `Client(${this.#base}, shop ${this.shopId}, secret ***)`;
  }

  #url(path: string, query?: Array<[string, string]>): URL {
    const url = new URL(path, this.#base);
    for (const [name, value] of query ?? []) url.searchParams.append(name, value);
    return url;
  }

  /** Sends one request with its own timeout (and the caller's `outer` signal) and reads its whole answer. */
  async #send(url: URL, init: RequestInit, timeoutMs: number, outer?: AbortSignal): Promise<Answer> {
    const timeout = AbortSignal.timeout(Math.max(1, Math.floor(timeoutMs)));
    const signal = outer === undefined ? timeout : AbortSignal.any([timeout, outer]);
    // Never follow a redirect: it would turn a POST into a GET without its
    // body, or carry the credentials elsewhere.
    const response = await this.#fetch(url, { ...init, signal, redirect: "manual" });
    const body = await response.text();
    const headers: Record<string, string> = {};
    response.headers.forEach((value, name) => {
      headers[name.toLowerCase()] = value;
    });
    return { status: response.status, headers, body };
  }

  /**
   * `POST /v1/payments` under `key`, retried until a definite answer or the
   * end of the budget, always with the same key and the same body bytes:
   * `paid`, `declined`, `canceled` (409 `payment_canceled`: the payment was
   * canceled, nothing taken; the order may be paid again under a new key),
   * `authorized` (`captureMethod: "manual"`: held, nothing taken; see
   * {@link Client.authorize}), or `uncertain`. Never throws for an unknown outcome: that is `{kind: "uncertain"}`.
   * Throws {@link KeyReusedError} (never retried) and {@link ProblemError}.
   */
  async pay(key: KeyLike, request: CreatePayment, options: PayOptions = {}): Promise<PayResult> {
    const value = keyValue(key);
    const body = paymentBody(request); // serialised once
    const { outcome, attempts } = await this.#postIdempotent<PayOutcome>(
      this.#url("v1/payments"),
      value,
      body,
      true,
      judgePayment,
      (id) => (id === null ? { kind: "uncertain" } : { kind: "uncertain", paymentId: id }),
      options.signal,
    );
    if (outcome.kind !== "uncertain" && !answersRequest(outcome.payment, request)) {
      // An answer about another payment of the order (a server older than
      // `order_already_paid`, or something in between): never "paid" for this request.
      throw OrderAlreadyPaidError.of(outcome.payment, attempts.length);
    }
    return { outcome, key: value, attempts, foundBeforePaying: false, replayed: lastReplayed(attempts) };
  }

  /**
   * Looks the order up first (`GET /v1/payments?reference=`): when it already
   * has a succeeded payment, that is the answer and nothing is sent (this
   * protects the order even after its key expired on the server). Otherwise
   * {@link Client.pay}. Only a succeeded payment counts: a `canceled` one took
   * nothing and freed the order (its own key answers `{kind: "canceled"}`;
   * pay the order again under a new key), and a pending or declined one is
   * the server's to judge. When the look-up fails, nothing is sent and it throws.
   */
  async payOrder(key: KeyLike, request: CreatePayment, options: PayOptions = {}): Promise<PayResult> {
    const value = keyValue(key);
    const existing = await this.paymentsFor(request.reference);
    const paid = existing.find((p) => p.status === "succeeded");
    // An authorization still holding money is the order's too (the server answers it to a new key).
    const held = existing.find((p) => isHeld(p.status));
    const found = paid ?? held;
    if (found !== undefined) {
      if (!answersRequest(found, request)) throw OrderAlreadyPaidError.of(found, 0);
      const outcome: PayOutcome = paid !== undefined ? { kind: "paid", payment: paid } : { kind: "authorized", payment: found };
      return { outcome, key: value, attempts: [], foundBeforePaying: true, replayed: false };
    }
    return this.pay(value, request, options);
  }

  /**
   * {@link Client.pay} with `captureMethod: "manual"`: holds the amount on the
   * card and takes nothing: `authorized` (then {@link Client.capture} and
   * {@link Client.void}), `declined` or `uncertain`. The key is the order's
   * payment key (`forOperation(order, "pay")`).
   */
  authorize(key: KeyLike, request: Omit<CreatePayment, "captureMethod">, options: PayOptions = {}): Promise<PayResult> {
    return this.pay(key, { ...request, captureMethod: "manual" }, options);
  }

  /**
   * `POST /v1/payments/{id}/captures` under the capture's own key
   * (`forOperation(order, "capture-1")`, `"capture-2"` for the next shipment),
   * retried with the same key and body bytes while the answer is 202 (pending
   * at the acquirer), 409 (`request_in_progress`, `authorization_busy`) or 503:
   * `captured`, `failed` (the acquirer refused; stored), `refused` (nothing
   * executed: `capture_exceeds_capturable`, `payment_not_capturable`, ...), or
   * `uncertain` when the budget (or `signal`) ran out first — never capture
   * again under a new key then. No amount captures all that is capturable, as
   * the final capture. Throws {@link KeyReusedError} and {@link ProblemError}
   * (`invalid_request`, ...).
   */
  async capture(paymentId: string, key: KeyLike, request: CreateCapture = {}, options: CaptureOptions = {}): Promise<CaptureResult> {
    const value = keyValue(key);
    const { outcome, attempts } = await this.#postIdempotent<CaptureOutcome>(
      this.#url(`v1/payments/${encodeURIComponent(paymentId)}/captures`),
      value,
      captureBody(request),
      false,
      judgeCapture,
      (id) => (id === null ? { kind: "uncertain" } : { kind: "uncertain", captureId: id }),
      options.signal,
    );
    return { outcome, key: value, attempts, replayed: lastReplayed(attempts) };
  }

  /**
   * `POST /v1/payments/{id}/void` under the void's own key
   * (`forOperation(order, "void")`), retried with the same key while the answer
   * is 202 (in flight), 409 or 503: `voided` (nothing captured: nothing
   * taken), `released` (the captures kept, `succeeded`, the rest released),
   * `failed` (the acquirer refused; stored), `refused` (nothing executed:
   * `payment_not_voidable`, ...), or `uncertain`.
   */
  async void(paymentId: string, key: KeyLike, options: VoidOptions = {}): Promise<VoidResult> {
    const value = keyValue(key);
    const { outcome, attempts } = await this.#postIdempotent<VoidOutcome>(
      this.#url(`v1/payments/${encodeURIComponent(paymentId)}/void`),
      value,
      "{}",
      false,
      judgeVoid,
      (id) => (id === null ? { kind: "uncertain" } : { kind: "uncertain", paymentId: id }),
      options.signal,
    );
    return { outcome, key: value, attempts, replayed: lastReplayed(attempts) };
  }

  /**
   * `POST /v1/payments/{id}/refunds` under the refund's own key (never the
   * payment's: `forOperation(order, "refund-1")`), retried like `pay`.
   */
  async refund(paymentId: string, key: KeyLike, request: CreateRefund = {}): Promise<RefundResult> {
    const value = keyValue(key);
    const body = refundBody(request);
    const { outcome, attempts } = await this.#postIdempotent<RefundOutcome>(
      this.#url(`v1/payments/${encodeURIComponent(paymentId)}/refunds`),
      value,
      body,
      false,
      judgeRefund,
      (id) => (id === null ? { kind: "uncertain" } : { kind: "uncertain", refundId: id }),
    );
    return { outcome, key: value, attempts };
  }

  /**
   * `POST /v1/payments/{id}/cancel` under the cancel's own key
   * (`forOperation(order, "cancel")`), retried with the same key while the
   * answer is 202 (the charge is looked up only once the settle window has
   * passed) until the cancel ends or the budget (or `signal`) does:
   * `canceled` (nothing taken), `refunded` (found and refunded in full),
   * `charged` (found, its refund refused), `declined`, or `uncertain` (never
   * an error: call again later with the same key). A payment already final
   * when the cancel came throws {@link PaymentNotCancelableError} (409
   * `payment_not_cancelable`, carrying the payment); other refusals are
   * {@link ProblemError} (`not_found`, `invalid_request`) and
   * {@link KeyReusedError}.
   */
  async cancel(paymentId: string, key: KeyLike, options: CancelOptions = {}): Promise<CancelResult> {
    const value = keyValue(key);
    const { outcome, attempts } = await this.#postIdempotent<CancelOutcome>(
      this.#url(`v1/payments/${encodeURIComponent(paymentId)}/cancel`),
      value,
      "{}",
      false,
      judgeCancel,
      (id) => (id === null ? { kind: "uncertain" } : { kind: "uncertain", paymentId: id }),
      options.signal,
    );
    return { outcome, key: value, attempts };
  }

  /**
   * `POST /v1/api-keys` under `key` (with a `full` key): makes a live key,
   * retried like {@link Client.pay} (same key, same body bytes) on transport
   * failures, 429 and 5xx. `result.apiKey.secret` is shown once: store it
   * now. A repeat under the same `key` makes nothing and answers the same key
   * without its secret (`replayed: true`); so if an answer was lost and a
   * retry got the replay, revoke that key and make another under a new
   * idempotency key. Throws {@link ProblemError} (`insufficient_scope`,
   * `api_key_limit_reached`, `invalid_request`), {@link KeyReusedError}, and
   * {@link UnavailableError} when the budget ran out (retry later with the same key).
   */
  createApiKey(key: KeyLike, request: CreateApiKey): Promise<ApiKeyResult> {
    return this.#postApiKey(this.#url("v1/api-keys"), key, createApiKeyBody(request));
  }

  /** `GET /v1/api-keys`: every key of the shop, newest first, revoked and expired ones too (never their secrets). */
  async listApiKeys(): Promise<ApiKey[]> {
    const list = await this.#read<List<ApiKey>>(this.#url("v1/api-keys"));
    return list.data;
  }

  /** `GET /v1/api-keys/{id}`: one key of the shop, never its secret (a `ProblemError` with code `not_found` when there is none). */
  apiKey(id: string): Promise<ApiKey> {
    return this.#read(this.#url(`v1/api-keys/${encodeURIComponent(id)}`));
  }

  /**
   * `POST /v1/api-keys/{id}/roll` under `key`: the successor (same scope and
   * description; its secret shown once) and the old key expiring after
   * `expireOldInSeconds` (0: at once; absent: 24 h; at most 7 days). Retried
   * and replayed like {@link Client.createApiKey}; 409 `api_key_inactive`
   * (revoked or expired) is a {@link ProblemError}.
   */
  rollApiKey(id: string, key: KeyLike, request: RollApiKey = {}): Promise<ApiKeyResult> {
    return this.#postApiKey(this.#url(`v1/api-keys/${encodeURIComponent(id)}/roll`), key, rollApiKeyBody(request));
  }

  /**
   * `POST /v1/api-keys/{id}/revoke` under `key`: the key stops working at
   * once. Revoking a revoked key changes nothing, so retries are safe (the
   * key is required, not stored).
   */
  revokeApiKey(id: string, key: KeyLike): Promise<ApiKeyResult> {
    return this.#postApiKey(this.#url(`v1/api-keys/${encodeURIComponent(id)}/revoke`), key, "{}");
  }

  async #postApiKey(url: URL, key: KeyLike, body: string): Promise<ApiKeyResult> {
    const value = keyValue(key);
    const { outcome, attempts } = await this.#postIdempotent<ApiKeyOutcome>(url, value, body, false, judgeApiKey, (id) =>
      id === null ? { kind: "uncertain" } : { kind: "uncertain", apiKeyId: id },
    );
    if (outcome.kind === "uncertain") {
      const last = attempts[attempts.length - 1]?.answer;
      throw new UnavailableError(last === undefined ? "no attempt" : describe(last), attempts.length);
    }
    return { apiKey: outcome.apiKey, key: value, attempts, replayed: lastReplayed(attempts) };
  }

  /**
   * `POST /v1/webhook-endpoints` under `key` (with a `full` key): registers
   * `request.url` for the event types `request.enabledEvents` (`["*"]`: every
   * type), retried like {@link Client.pay} (same key, same body bytes) on
   * transport failures, 429 and 5xx. `result.endpoint.secret` (the signing
   * secret) is shown once: store it now. A repeat under the same `key` makes
   * nothing and answers the same endpoint without its secret (`replayed:
   * true`); if the secret was lost that way, roll it. Throws
   * {@link ProblemError} (`insufficient_scope`, `webhook_endpoint_limit_reached`
   * at 16, `invalid_request` for a URL the service will not deliver to or an
   * unknown event type), {@link KeyReusedError}, and {@link UnavailableError}
   * when the budget ran out (retry later with the same key).
   */
  createWebhookEndpoint(key: KeyLike, request: CreateWebhookEndpoint): Promise<WebhookEndpointResult> {
    return this.#postEndpoint(this.#url("v1/webhook-endpoints"), key, createWebhookEndpointBody(request));
  }

  /** `GET /v1/webhook-endpoints`: every endpoint of the shop, oldest first (never their secrets). */
  async listWebhookEndpoints(): Promise<WebhookEndpoint[]> {
    const list = await this.#read<List<WebhookEndpoint>>(this.#url("v1/webhook-endpoints"));
    return list.data;
  }

  /** `GET /v1/webhook-endpoints/{id}`: one endpoint, never its secret (a `ProblemError` with code `not_found` when there is none). */
  webhookEndpoint(id: string): Promise<WebhookEndpoint> {
    return this.#read(this.#url(`v1/webhook-endpoints/${encodeURIComponent(id)}`));
  }

  /**
   * `POST /v1/webhook-endpoints/{id}` under `key`: sets the fields given
   * (`enabled: false` pauses deliveries, open ones wait; `description: ""`
   * clears it). Setting values is idempotent, so retries are safe (the key is
   * required, not stored).
   */
  updateWebhookEndpoint(id: string, key: KeyLike, request: UpdateWebhookEndpoint): Promise<WebhookEndpointResult> {
    return this.#postEndpoint(this.#url(`v1/webhook-endpoints/${encodeURIComponent(id)}`), key, updateWebhookEndpointBody(request));
  }

  /**
   * `DELETE /v1/webhook-endpoints/{id}`: no delivery to it any more (its open
   * deliveries are given up); answers the endpoint as it was deleted. Retried
   * like a read; a second delete is a `ProblemError` with code `not_found` (so
   * is a retry after a lost answer: the endpoint is gone either way).
   */
  deleteWebhookEndpoint(id: string): Promise<WebhookEndpoint> {
    return this.#read(this.#url(`v1/webhook-endpoints/${encodeURIComponent(id)}`), true, "DELETE");
  }

  /**
   * `POST /v1/webhook-endpoints/{id}/roll-secret` under `key`: a new signing
   * secret (shown once) signs from now on; the old one keeps signing beside it
   * for `expireOldInSeconds` (0: stops at once; absent: 24 h; at most 7 days),
   * so each delivery meanwhile carries two `v1=` signatures and
   * {@link verifyWebhook} accepts either secret. Retried and replayed like
   * {@link Client.createWebhookEndpoint}.
   */
  rollWebhookEndpointSecret(id: string, key: KeyLike, request: RollWebhookEndpointSecret = {}): Promise<WebhookEndpointResult> {
    return this.#postEndpoint(
      this.#url(`v1/webhook-endpoints/${encodeURIComponent(id)}/roll-secret`),
      key,
      rollWebhookEndpointSecretBody(request),
    );
  }

  async #postEndpoint(url: URL, key: KeyLike, body: string): Promise<WebhookEndpointResult> {
    const value = keyValue(key);
    const { outcome, attempts } = await this.#postIdempotent<WebhookEndpointOutcome>(url, value, body, false, judgeWebhookEndpoint, (id) =>
      id === null ? { kind: "uncertain" } : { kind: "uncertain", endpointId: id },
    );
    if (outcome.kind === "uncertain") {
      const last = attempts[attempts.length - 1]?.answer;
      throw new UnavailableError(last === undefined ? "no attempt" : describe(last), attempts.length);
    }
    return { endpoint: outcome.endpoint, key: value, attempts, replayed: lastReplayed(attempts) };
  }

  async #postIdempotent<O>(
    url: URL,
    key: string,
    body: string,
    prefer: boolean,
    judge: (answer: Answer, attempts: number, nowMs: number) => Judgement<O>,
    uncertain: (id: string | null) => O,
    signal?: AbortSignal,
  ): Promise<{ outcome: O; attempts: Attempt[] }> {
    const policy = this.policy;
    const deadline = this.#now() + policy.budgetMs;
    const attempts: Attempt[] = [];
    let namedId: string | null = null;
    // Whether an earlier attempt may have executed (sent, no definite answer):
    // from then on a refusal proves nothing, and the result is uncertain.
    let maybeExecuted = false;
    // The last answer proved the key executed nothing (`authorization_busy`):
    // the outcome if the call ends there and nothing earlier may have executed.
    let refused: { outcome: O } | null = null;
    const ended = (): O => (refused !== null && !maybeExecuted ? refused.outcome : uncertain(namedId));
    for (;;) {
      // The caller gave up: whatever was sent may have executed. Uncertain,
      // never an error that reads as "not charged".
      if (signal?.aborted) return { outcome: ended(), attempts };
      const number = attempts.length + 1;
      const timeout = Math.min(policy.attemptTimeoutMs, Math.max(deadline - this.#now(), 1));
      const headers: Record<string, string> = {
        authorization: this.#auth,
        "idempotency-key": key,
        "content-type": "application/json",
      };
      const wait = prefer ? preferSeconds(policy, timeout) : null;
      if (wait !== null) headers["prefer"] = `wait=${wait}`;
      const sentAt = this.#now();
      let seen: AttemptAnswer;
      let raw: string | null = null;
      let retryAfter: number | null = null;
      let done: { outcome: O; refusal: boolean } | null = null;
      let failure: Error | null = null;
      refused = null;
      try {
        const answer = await this.#send(url, { method: "POST", headers, body }, timeout, signal);
        const judged = judge(answer, number, this.#now());
        seen = judged.seen;
        raw = answer.body;
        if (judged.namedId !== null) namedId = judged.namedId;
        if (judged.step.kind === "done") done = { outcome: judged.step.outcome, refusal: judged.step.refusal === true };
        else if (judged.step.kind === "fail") failure = judged.step.error;
        else {
          retryAfter = judged.step.retryAfterMs;
          if (judged.step.refused !== undefined) refused = { outcome: judged.step.refused };
        }
      } catch (error) {
        const { failure: kind, message } = classifyFailure(error);
        seen = { kind: "failed", failure: kind, message };
      }
      const attempt: Attempt = { number, sentAt, tookMs: this.#now() - sentAt, answer: seen, body: raw, retryInMs: null };
      if (done !== null) {
        attempts.push(attempt);
        // A refusal after an attempt that may have executed proves nothing.
        return { outcome: done.refusal && maybeExecuted ? uncertain(namedId) : done.outcome, attempts };
      }
      if (failure !== null) {
        if (maybeExecuted) {
          attempts.push(attempt);
          return { outcome: uncertain(namedId), attempts };
        }
        throw failure;
      }
      // A connect failure sent nothing; `authorization_busy` executed nothing under this key.
      maybeExecuted ||= !(seen.kind === "failed" && seen.failure === "connect") && refused === null;
      const delay = delayMs(policy, number, retryAfter, this.#random);
      if (number >= policy.maxAttempts || this.#now() + delay >= deadline) {
        attempts.push(attempt);
        return { outcome: ended(), attempts };
      }
      attempt.retryInMs = delay;
      attempts.push(attempt);
      await untilAborted(this.#sleep(delay), signal);
    }
  }

  /** A GET with the retry policy: transport errors, 408/409/429 and 5xx are retried; other answers are final. */
  /** A request without a body that is safe to repeat (a GET, or a DELETE whose repeat changes nothing), with the retry loop of a read. */
  async #read<T>(url: URL, auth = true, method: "GET" | "DELETE" = "GET"): Promise<T> {
    const policy = this.policy;
    const deadline = this.#now() + policy.budgetMs;
    for (let number = 1; ; number++) {
      const timeout = Math.min(policy.attemptTimeoutMs, Math.max(deadline - this.#now(), 1));
      const headers: Record<string, string> = auth ? { authorization: this.#auth } : {};
      let last: string;
      let retryAfter: number | null = null;
      try {
        const answer = await this.#send(url, { method, headers }, timeout);
        if (answer.status === 200) {
          try {
            return JSON.parse(answer.body) as T;
          } catch (error) {
            throw new UnexpectedAnswerError(answer.status, `${String(error)}: ${answer.body.slice(0, 300)}`, number);
          }
        }
        if (!transient(answer.status)) {
          const problem = problemOf(answer);
          if (problem !== null) throw new ProblemError(problem, number);
          throw new UnexpectedAnswerError(answer.status, answer.body.slice(0, 300), number);
        }
        last = `${answer.status}`;
        retryAfter = retryAfterOf(answer, this.#now());
      } catch (error) {
        if (error instanceof ProblemError || error instanceof UnexpectedAnswerError) throw error;
        const { failure, message } = classifyFailure(error);
        last = `${failure}: ${message}`;
      }
      const delay = delayMs(policy, number, retryAfter, this.#random);
      if (number >= policy.maxAttempts || this.#now() + delay >= deadline) throw new UnavailableError(last, number);
      await this.#sleep(delay);
    }
  }

  /** `GET /v1/payments/{id}` (a `ProblemError` with code `not_found` when there is none). */
  payment(id: string): Promise<Payment> {
    return this.#read(this.#url(`v1/payments/${encodeURIComponent(id)}`));
  }

  /**
   * `GET /v1/payments/{id}/history`: everything that happened to one of the
   * shop's payments (and its refunds), oldest first, and its keys' repeat
   * counts (a `ProblemError` with code `not_found` for a payment of another
   * shop, or none).
   */
  paymentHistory(id: string): Promise<PaymentHistory> {
    return this.#read(this.#url(`v1/payments/${encodeURIComponent(id)}/history`));
  }

  /** An order's payments, oldest first (the newest 100: an order has a handful). */
  async paymentsFor(reference: string): Promise<Payment[]> {
    const page = await this.listPayments({ reference, limit: 100 });
    return [...page.data].reverse();
  }

  /** `GET /v1/payments`: one page of the shop's payments, newest first. */
  listPayments(params: PaymentListParams = {}): Promise<List<Payment>> {
    return this.#read(this.#url("v1/payments", paymentPairs(params)));
  }

  /** Every page of `GET /v1/payments` from `params` on (older and older), one page at a time. */
  async *paymentPages(params: PaymentListParams = {}): AsyncGenerator<List<Payment>, void, undefined> {
    yield* pages((cursor) => this.listPayments({ ...params, ...cursor }), params);
  }

  /** Every payment matching `params`, over all pages, newest first. */
  async *allPayments(params: PaymentListParams = {}): AsyncGenerator<Payment, void, undefined> {
    for await (const page of this.paymentPages(params)) yield* page.data;
  }

  /** `GET /v1/refunds`: one page of the shop's refunds, newest first. */
  listRefunds(params: ListParams = {}): Promise<List<Refund>> {
    return this.#read(this.#url("v1/refunds", listPairs(params)));
  }

  async *refundPages(params: ListParams = {}): AsyncGenerator<List<Refund>, void, undefined> {
    yield* pages((cursor) => this.listRefunds({ ...params, ...cursor }), params);
  }

  /** `GET /v1/payments/{id}/refunds`: one page of a payment's refunds, newest first. */
  paymentRefunds(paymentId: string, params: ListParams = {}): Promise<List<Refund>> {
    return this.#read(this.#url(`v1/payments/${encodeURIComponent(paymentId)}/refunds`, listPairs(params)));
  }

  async *paymentRefundPages(paymentId: string, params: ListParams = {}): AsyncGenerator<List<Refund>, void, undefined> {
    yield* pages((cursor) => this.paymentRefunds(paymentId, { ...params, ...cursor }), params);
  }

  /** `GET /v1/captures/{id}` (a `ProblemError` with code `not_found` when there is none). */
  captureById(id: string): Promise<Capture> {
    return this.#read(this.#url(`v1/captures/${encodeURIComponent(id)}`));
  }

  /** `GET /v1/payments/{id}/captures`: one page of a payment's captures, newest first. */
  paymentCaptures(paymentId: string, params: ListParams = {}): Promise<List<Capture>> {
    return this.#read(this.#url(`v1/payments/${encodeURIComponent(paymentId)}/captures`, listPairs(params)));
  }

  /** Every page of a payment's captures from `params` on, one page at a time. */
  async *paymentCapturePages(paymentId: string, params: ListParams = {}): AsyncGenerator<List<Capture>, void, undefined> {
    yield* pages((cursor) => this.paymentCaptures(paymentId, { ...params, ...cursor }), params);
  }

  /** Every capture of a payment, over all pages, newest first. */
  async *allPaymentCaptures(paymentId: string, params: ListParams = {}): AsyncGenerator<Capture, void, undefined> {
    for await (const page of this.paymentCapturePages(paymentId, params)) yield* page.data;
  }

  /** `GET /v1/idempotency-keys/{key}`: what the service knows of one of the shop's keys. */
  idempotencyKey(key: KeyLike): Promise<IdempotencyKeyInfo> {
    return this.#read(this.#url(`v1/idempotency-keys/${encodeURIComponent(keyValue(key))}`));
  }

  /**
   * `GET /sim/ledger` on the service's operator listener (`operatorUrl`, e.g.
   * `http://127.0.0.1:8081`; never on the public one): the embedded
   * simulator's ledger (a test tool, not the v1 API).
   */
  acquirerLedger(operatorUrl: string): Promise<Ledger> {
    return this.#read(new URL("sim/ledger", operatorUrl.replace(/\/*$/, "/")), false);
  }
}

/** One attempt's answer, for an error message. */
function describe(answer: AttemptAnswer): string {
  if (answer.kind === "failed") return `${answer.failure}: ${answer.message}`;
  return answer.problem === null ? `${answer.status}` : `${answer.status} ${answer.problem}`;
}

function lastReplayed(attempts: Attempt[]): boolean {
  const last = attempts[attempts.length - 1]?.answer;
  return last !== undefined && last.kind === "http" && last.replayed;
}

export function listPairs(params: ListParams): Array<[string, string]> {
  const pairs: Array<[string, string]> = [];
  if (params.limit !== undefined) pairs.push(["limit", String(params.limit)]);
  if (params.startingAfter !== undefined) pairs.push(["starting_after", params.startingAfter]);
  if (params.endingBefore !== undefined) pairs.push(["ending_before", params.endingBefore]);
  return pairs;
}

export function paymentPairs(params: PaymentListParams): Array<[string, string]> {
  const pairs = listPairs(params);
  if (params.status !== undefined) pairs.push(["status", params.status]);
  if (params.reference !== undefined) pairs.push(["reference", params.reference]);
  if (params.createdGte !== undefined) pairs.push(["created_gte", params.createdGte]);
  if (params.createdLt !== undefined) pairs.push(["created_lt", params.createdLt]);
  return pairs;
}

/**
 * Walks pages from a cursor: after each page, the next cursor is the last
 * object's id (`starting_after`), or, when reading newer (`endingBefore`),
 * the first object's id.
 */
async function* pages<T extends { id: string }>(
  read: (cursor: ListParams) => Promise<List<T>>,
  start: ListParams,
): AsyncGenerator<List<T>, void, undefined> {
  let cursor: ListParams = {};
  if (start.startingAfter !== undefined) cursor = { startingAfter: start.startingAfter };
  if (start.endingBefore !== undefined) cursor = { endingBefore: start.endingBefore };
  for (;;) {
    const page = await read(cursor);
    yield page;
    if (!page.has_more || page.data.length === 0) return;
    if (cursor.endingBefore !== undefined) {
      cursor = { endingBefore: page.data[0]!.id };
    } else {
      cursor = { startingAfter: page.data[page.data.length - 1]!.id };
    }
  }
}
