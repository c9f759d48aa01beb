/**
 * What a call ended with, what each attempt saw, and what one answer of a
 * keyed POST means (done, retry, or fail). Pure: no I/O; answers come in as
 * plain values.
 */
import {
  asApiKey,
  asCapture,
  asPayment,
  asRefund,
  asWebhookEndpoint,
  type ApiKey,
  type Capture,
  type Payment,
  type PaymentStatus,
  type Refund,
  type WebhookEndpoint,
} from "./model.js";
import {
  ChargeonceError,
  KeyReusedError,
  OrderAlreadyPaidError,
  parseProblem,
  PaymentNotCancelableError,
  ProblemError,
  UnexpectedAnswerError,
  type Problem,
  type ProblemCode,
} from "./problem.js";
import { parseRetryAfter, transient } from "./retry.js";

/** Where a payment stands after a call: the only answers a payment client may give. */
export type PayOutcome =
  /** Charged (by this call, an earlier attempt of the same intent, or earlier for the same order). */
  | { kind: "paid"; payment: Payment }
  /** Declined by the acquirer: definite, nothing charged. */
  | { kind: "declined"; payment: Payment }
  /** Canceled before any charge was found (a cancel, or the service gave up on it): definite, nothing taken; the order may be paid again under a new key. */
  | { kind: "canceled"; payment: Payment }
  /**
   * Held, nothing taken yet: an authorization (`captureMethod: "manual"`, or the
   * order's authorization found under another key), `authorized` or
   * `partially_captured`. Captures take it, a void or the expiry releases it.
   */
  | { kind: "authorized"; payment: Payment }
  /**
   * The budget ran out before a definite answer: maybe charged. **Do not pay
   * again with a new key.** Retry later with the same key, or look it up.
   */
  | { kind: "uncertain"; paymentId?: string };

/** Where a refund stands after a call. */
export type RefundOutcome =
  | { kind: "refunded"; refund: Refund }
  /** The acquirer refused: definite, nothing given back; refund again under a new refund key. */
  | { kind: "failed"; refund: Refund }
  | { kind: "uncertain"; refundId?: string };

/** Where a payment stands after a cancel call: whether the customer holds a charge. */
export type CancelOutcome =
  /** No charge was found after the settle window: nothing taken (a charge that lands later is refunded by the service). */
  | { kind: "canceled"; payment: Payment }
  /** The charge was found: kept `succeeded` and refunded in full. */
  | { kind: "refunded"; payment: Payment }
  /** The charge was found and kept, but not refunded in full: the acquirer refused the refund. The customer holds a charge: a person must look. */
  | { kind: "charged"; payment: Payment }
  /** The acquirer had declined the charge: nothing taken. */
  | { kind: "declined"; payment: Payment }
  /** The budget ran out while the cancel still ran: retry later with the same key (the service ends it on its own too). */
  | { kind: "uncertain"; paymentId?: string };

/** A refusal that executed nothing (no amount reserved, nothing sent to the acquirer): its code, status and document. */
export interface Refusal {
  kind: "refused";
  code: ProblemCode;
  status: number;
  problem: Problem;
}

/** Where a capture stands after a call. */
export type CaptureOutcome =
  /** The acquirer took the capture's amount. */
  | { kind: "captured"; capture: Capture }
  /** The acquirer refused (422 `capture_failed`, stored): nothing taken by it; its amount is capturable again under a new key. */
  | { kind: "failed"; capture: Capture }
  /**
   * Refused before executing: `capture_exceeds_capturable` (`problem.raw.amount_capturable`),
   * `payment_not_capturable` (`problem.raw.payment_status`), `currency_mismatch`,
   * `not_found`, or `authorization_busy` still when the budget ran out.
   */
  | Refusal
  /** The budget ran out while the capture was pending: it may have taken the money. **Never capture again under a new key**: retry later with the same key. */
  | { kind: "uncertain"; captureId?: string };

/** Where an authorization stands after a void call. */
export type VoidOutcome =
  /** Nothing was captured: `voided`, the hold released, nothing taken. */
  | { kind: "voided"; payment: Payment }
  /** Some was captured: `succeeded` with `amount_captured` taken and the rest released. */
  | { kind: "released"; payment: Payment }
  /** The acquirer refused the void (422 `void_failed`, stored): the authorization is open again. */
  | { kind: "failed"; payment: Payment; failureCode: string | null }
  /** Refused before executing: `payment_not_voidable` (charged at once: refund it instead; or used up, voided, expired), `not_found`, or `authorization_busy` still when the budget ran out. */
  | Refusal
  /** The budget ran out while the void was in flight: retry later with the same key (the service ends it on its own too). */
  | { kind: "uncertain"; paymentId?: string };

/** Why an attempt got no answer. */
export type FailureKind =
  /** The connection could not be made: the request was not sent. */
  | "connect"
  /** No answer within the attempt timeout: it may have executed. */
  | "timeout"
  /** The connection broke after the request went out (a lost answer): it may have executed. */
  | "lost";

/** How one attempt ended. */
export type AttemptAnswer =
  | {
      kind: "http";
      status: number;
      /** `Idempotent-Replayed: true`: the stored answer of the key's first request. */
      replayed: boolean;
      /** `Preference-Applied: wait=...`: the server waited for the first request. */
      waited: boolean;
      problem: ProblemCode | null;
      paymentStatus: PaymentStatus | null;
    }
  | { kind: "failed"; failure: FailureKind; message: string };

/** One attempt of a call. */
export interface Attempt {
  /** 1 for the first. */
  number: number;
  /** Milliseconds since the epoch when it was sent. */
  sentAt: number;
  tookMs: number;
  answer: AttemptAnswer;
  /** The answer's body exactly as received (`null` without an answer). */
  body: string | null;
  /** The wait before the next attempt, when there was one. */
  retryInMs: number | null;
}

/** The result of a payment call. */
export interface PayResult {
  outcome: PayOutcome;
  /** The key every attempt carried (its value). */
  key: string;
  /** Every attempt; empty when `payOrder` found the order paid and sent nothing. */
  attempts: Attempt[];
  /** `payOrder` found the order already paid: nothing was sent. */
  foundBeforePaying: boolean;
  /** The last attempt's answer was a replay of the key's first answer. */
  replayed: boolean;
}

export interface CancelResult {
  outcome: CancelOutcome;
  key: string;
  attempts: Attempt[];
}

export interface RefundResult {
  outcome: RefundOutcome;
  key: string;
  attempts: Attempt[];
}

export interface CaptureResult {
  outcome: CaptureOutcome;
  key: string;
  attempts: Attempt[];
  /** The last attempt's answer was a replay of the key's first answer. */
  replayed: boolean;
}

export interface VoidResult {
  outcome: VoidOutcome;
  key: string;
  attempts: Attempt[];
  /** The last attempt's answer was a replay of the key's first answer. */
  replayed: boolean;
}

/**
 * Where a key's make, roll or revoke stands: `made` (the key; its `secret`
 * only when this call's request made it), or `uncertain` when the budget ran
 * out first (the client throws {@link UnavailableError} then).
 */
export type ApiKeyOutcome = { kind: "made"; apiKey: ApiKey } | { kind: "uncertain"; apiKeyId?: string };

/** A key made, rolled or revoked. */
export interface ApiKeyResult {
  /** The key (the successor, for a roll). `apiKey.secret` is set only when this call made it: store it now. */
  apiKey: ApiKey;
  /** The idempotency key sent. */
  key: string;
  attempts: Attempt[];
  /**
   * The answer was a replay of the idempotency key's first request
   * (`Idempotent-Replayed: true`): nothing was made, and there is no secret.
   */
  replayed: boolean;
}

/**
 * Where an endpoint's make, update or secret roll stands: `made` (the
 * endpoint; its `secret` only when this call's request made it), or
 * `uncertain` when the budget ran out first (the client throws
 * {@link UnavailableError} then).
 */
export type WebhookEndpointOutcome = { kind: "made"; endpoint: WebhookEndpoint } | { kind: "uncertain"; endpointId?: string };

/** An endpoint made, changed or with its secret rolled. */
export interface WebhookEndpointResult {
  /** The endpoint. `endpoint.secret` is set only when this call made it (a make or a roll): store it now. */
  endpoint: WebhookEndpoint;
  /** The idempotency key sent. */
  key: string;
  attempts: Attempt[];
  /**
   * The answer was a replay of the idempotency key's first request
   * (`Idempotent-Replayed: true`): nothing was changed, and there is no secret.
   */
  replayed: boolean;
}

/** A raw HTTP answer: a status, lower-cased headers, the body text. */
export interface Answer {
  status: number;
  headers: Readonly<Record<string, string>>;
  body: string;
}

/** What to do after one attempt. */
export type Step<O> =
  /**
   * `refusal`: the outcome is a refusal before executing (a capture's or
   * void's `refused`): after an attempt that may have executed it proves
   * nothing, and the call ends uncertain, as for a thrown refusal.
   */
  | { kind: "done"; outcome: O; refusal?: boolean }
  /**
   * Unknown or transient: try again with the same key and body, not sooner
   * than `retryAfterMs`. `refused`: the answer proves the key executed nothing
   * (409 `authorization_busy`): the outcome if the budget ends here and no
   * earlier attempt may have executed (else uncertain).
   */
  | { kind: "retry"; retryAfterMs: number | null; refused?: O }
  | { kind: "fail"; error: ChargeonceError };

export interface Judgement<O> {
  seen: AttemptAnswer;
  step: Step<O>;
  /** The payment (or refund) id the answer named, if any. */
  namedId: string | null;
}

export function retryAfterOf(answer: Answer, nowMs: number = Date.now()): number | null {
  const value = answer.headers["retry-after"];
  return value === undefined ? null : parseRetryAfter(value, nowMs);
}

export function problemOf(answer: Answer): Problem | null {
  const type = answer.headers["content-type"] ?? "";
  if (!type.includes("json")) return null;
  return parseProblem(answer.status, answer.body, answer.headers["request-id"] ?? null);
}

function seenOf(answer: Answer, payment: Payment | null, problem: Problem | null): AttemptAnswer {
  return {
    kind: "http",
    status: answer.status,
    replayed: answer.headers["idempotent-replayed"] === "true",
    waited: (answer.headers["preference-applied"] ?? "").trimStart().startsWith("wait"),
    problem: problem?.code ?? null,
    paymentStatus: payment?.status ?? null,
  };
}

function parseJson(body: string): unknown {
  try {
    return JSON.parse(body);
  } catch {
    return undefined;
  }
}

/** Decides what an answer of `POST /v1/payments` means. */
export function judgePayment(answer: Answer, attempts: number, nowMs: number = Date.now()): Judgement<PayOutcome> {
  const { status } = answer;
  if (status >= 200 && status <= 202) {
    const payment = asPayment(parseJson(answer.body));
    const seen = seenOf(answer, payment, null);
    if (payment === null) {
      // A success status without a readable payment: mangled on the way. Unknown; ask again.
      return { seen, step: { kind: "retry", retryAfterMs: retryAfterOf(answer, nowMs) }, namedId: null };
    }
    if (payment.status === "succeeded" && status !== 202) {
      return { seen, step: { kind: "done", outcome: { kind: "paid", payment } }, namedId: payment.id };
    }
    if (payment.status === "declined" && status !== 202) {
      return { seen, step: { kind: "done", outcome: { kind: "declined", payment } }, namedId: payment.id };
    }
    if (isHeld(payment.status) && status !== 202) {
      return { seen, step: { kind: "done", outcome: { kind: "authorized", payment } }, namedId: payment.id };
    }
    // 202, or a success status with a pending payment: not known yet.
    return { seen, step: { kind: "retry", retryAfterMs: retryAfterOf(answer, nowMs) }, namedId: payment.id };
  }
  const problem = problemOf(answer);
  const seen = seenOf(answer, problem?.payment ?? null, problem);
  const namedId = problem?.payment?.id ?? null;
  if (status === 402 && problem !== null && problem.code === "payment_declined") {
    if (problem.payment !== null) {
      return { seen, step: { kind: "done", outcome: { kind: "declined", payment: problem.payment } }, namedId };
    }
    return { seen, step: unexpected(answer, attempts), namedId };
  }
  if (status === 409 && problem !== null && problem.code === "order_already_paid" && problem.payment !== null) {
    return { seen, step: { kind: "fail", error: new OrderAlreadyPaidError(problem, problem.payment, attempts) }, namedId };
  }
  if (status === 409 && problem !== null && problem.code === "payment_canceled") {
    if (problem.payment !== null) {
      return { seen, step: { kind: "done", outcome: { kind: "canceled", payment: problem.payment } }, namedId };
    }
    return { seen, step: unexpected(answer, attempts), namedId };
  }
  return { seen, step: notDefinite(answer, problem, attempts, nowMs), namedId };
}

/** What a cancel's 200 says, by the payment it ended with; `null` for a payment still pending. */
function cancelEnded(payment: Payment): CancelOutcome | null {
  switch (payment.status) {
    case "canceled":
      return { kind: "canceled", payment };
    case "declined":
      return { kind: "declined", payment };
    case "succeeded":
      return sameDecimal(payment.amount_refunded.value, payment.amount.value)
        ? { kind: "refunded", payment }
        : { kind: "charged", payment };
    default:
      return null;
  }
}

/**
 * Decides what an answer of `POST /v1/payments/{id}/cancel` means: a 200 ends
 * it (the payment says how), a 202 is asked again (with the same key, after
 * `Retry-After`), `payment_not_cancelable` (409, stored) is a
 * {@link PaymentNotCancelableError}.
 */
export function judgeCancel(answer: Answer, attempts: number, nowMs: number = Date.now()): Judgement<CancelOutcome> {
  const { status } = answer;
  if (status >= 200 && status <= 202) {
    const payment = asPayment(parseJson(answer.body));
    const seen = seenOf(answer, payment, null);
    if (payment === null) return { seen, step: { kind: "retry", retryAfterMs: retryAfterOf(answer, nowMs) }, namedId: null };
    const ended = status === 200 ? cancelEnded(payment) : null;
    if (ended !== null) return { seen, step: { kind: "done", outcome: ended }, namedId: payment.id };
    return { seen, step: { kind: "retry", retryAfterMs: retryAfterOf(answer, nowMs) }, namedId: payment.id };
  }
  const problem = problemOf(answer);
  const seen = seenOf(answer, problem?.payment ?? null, problem);
  const namedId = problem?.payment?.id ?? null;
  if (status === 409 && problem !== null && problem.code === "payment_not_cancelable") {
    return { seen, step: { kind: "fail", error: new PaymentNotCancelableError(problem, attempts) }, namedId };
  }
  return { seen, step: notDefinite(answer, problem, attempts, nowMs), namedId };
}

/** Two decimal strings of the same amount (`"10.00"` and `"10.0"`), compared without floats. */
function sameDecimal(a: string, b: string): boolean {
  const norm = (v: string): string => {
    const [whole = "", fraction = ""] = v.trim().split(".");
    return `${whole.replace(/^0+(?=\d)/, "")}.${fraction.replace(/0+$/, "")}`;
  };
  return norm(a) === norm(b);
}

/** Whether `payment` is the request's: the same order, amount and currency. Only then is it paid for this request. */
export function answersRequest(payment: Payment, request: { amount: { value: string; currency: string }; reference: string }): boolean {
  return (
    payment.reference === request.reference &&
    payment.amount.currency === request.amount.currency &&
    sameDecimal(payment.amount.value, request.amount.value)
  );
}

/** Decides what an answer of `POST /v1/payments/{id}/refunds` means. */
export function judgeRefund(answer: Answer, attempts: number, nowMs: number = Date.now()): Judgement<RefundOutcome> {
  const { status } = answer;
  if (status >= 200 && status <= 202) {
    const refund = asRefund(parseJson(answer.body));
    const seen = seenOf(answer, null, null);
    if (refund === null) return { seen, step: { kind: "retry", retryAfterMs: retryAfterOf(answer, nowMs) }, namedId: null };
    if (refund.status === "succeeded" && status !== 202) {
      return { seen, step: { kind: "done", outcome: { kind: "refunded", refund } }, namedId: refund.id };
    }
    return { seen, step: { kind: "retry", retryAfterMs: retryAfterOf(answer, nowMs) }, namedId: refund.id };
  }
  const problem = problemOf(answer);
  const seen = seenOf(answer, null, problem);
  const refund = problem?.refund ?? null;
  const namedId = refund?.id ?? null;
  if (status === 422 && problem !== null && problem.code === "refund_failed") {
    if (refund !== null) return { seen, step: { kind: "done", outcome: { kind: "failed", refund } }, namedId };
    return { seen, step: unexpected(answer, attempts), namedId };
  }
  return { seen, step: notDefinite(answer, problem, attempts, nowMs), namedId };
}

/** Refusals of a key's make or roll that waiting cannot change (409s, otherwise retried). */
const API_KEY_REFUSALS: readonly string[] = ["api_key_limit_reached", "api_key_inactive"];

/**
 * Decides what an answer of `POST /v1/api-keys`, `.../{id}/roll` or
 * `.../{id}/revoke` means: 200 or 201 with the key is `made`; 409
 * `api_key_limit_reached` and `api_key_inactive` are {@link ProblemError};
 * the rest as for every keyed POST (transient statuses retried with the same
 * key and body).
 */
export function judgeApiKey(answer: Answer, attempts: number, nowMs: number = Date.now()): Judgement<ApiKeyOutcome> {
  const { status } = answer;
  if (status === 200 || status === 201) {
    const apiKey = asApiKey(parseJson(answer.body));
    const seen = seenOf(answer, null, null);
    // Mangled on the way: ask again (a repeat makes nothing).
    if (apiKey === null) return { seen, step: { kind: "retry", retryAfterMs: retryAfterOf(answer, nowMs) }, namedId: null };
    return { seen, step: { kind: "done", outcome: { kind: "made", apiKey } }, namedId: apiKey.id };
  }
  const problem = problemOf(answer);
  const seen = seenOf(answer, null, problem);
  if (status === 409 && problem !== null && API_KEY_REFUSALS.includes(problem.code)) {
    return { seen, step: { kind: "fail", error: new ProblemError(problem, attempts) }, namedId: null };
  }
  return { seen, step: notDefinite(answer, problem, attempts, nowMs), namedId: null };
}

/**
 * Decides what an answer of `POST /v1/webhook-endpoints`, `.../{id}` (an
 * update) or `.../{id}/roll-secret` means: 200 or 201 with the endpoint is
 * `made`; 409 `webhook_endpoint_limit_reached` is a {@link ProblemError}; the
 * rest as for every keyed POST (transient statuses retried with the same key
 * and body).
 */
export function judgeWebhookEndpoint(answer: Answer, attempts: number, nowMs: number = Date.now()): Judgement<WebhookEndpointOutcome> {
  const { status } = answer;
  if (status === 200 || status === 201) {
    const endpoint = asWebhookEndpoint(parseJson(answer.body));
    const seen = seenOf(answer, null, null);
    // Mangled on the way: ask again (a repeat makes nothing).
    if (endpoint === null) return { seen, step: { kind: "retry", retryAfterMs: retryAfterOf(answer, nowMs) }, namedId: null };
    return { seen, step: { kind: "done", outcome: { kind: "made", endpoint } }, namedId: endpoint.id };
  }
  const problem = problemOf(answer);
  const seen = seenOf(answer, null, problem);
  if (status === 409 && problem !== null && problem.code === "webhook_endpoint_limit_reached") {
    return { seen, step: { kind: "fail", error: new ProblemError(problem, attempts) }, namedId: null };
  }
  return { seen, step: notDefinite(answer, problem, attempts, nowMs), namedId: null };
}

/** An authorization still holding money for captures. */
export function isHeld(status: PaymentStatus): boolean {
  return status === "authorized" || status === "partially_captured";
}

function refusalOf(problem: Problem): Refusal {
  return { kind: "refused", code: problem.code, status: problem.status, problem };
}

/** Refusals of a capture that executed nothing (the key is free again). */
const CAPTURE_REFUSALS: readonly string[] = ["capture_exceeds_capturable", "payment_not_capturable", "currency_mismatch", "not_found"];
/** Refusals of a void that executed nothing. */
const VOID_REFUSALS: readonly string[] = ["payment_not_voidable", "not_found"];

/**
 * Decides what an answer of `POST /v1/payments/{id}/captures` means: 201 with
 * the capture `succeeded` is `captured`; 202 (pending at the acquirer) is
 * asked again with the same key; 422 `capture_failed` (stored) is `failed`; a
 * refusal that executed nothing is `refused`; 409 `authorization_busy` is
 * asked again (the refusal if the budget ends there); 503 and 409
 * `request_in_progress` are retried as for every keyed POST.
 */
export function judgeCapture(answer: Answer, attempts: number, nowMs: number = Date.now()): Judgement<CaptureOutcome> {
  const { status } = answer;
  if (status >= 200 && status <= 202) {
    const capture = asCapture(parseJson(answer.body));
    const seen = seenOf(answer, null, null);
    if (capture === null) return { seen, step: { kind: "retry", retryAfterMs: retryAfterOf(answer, nowMs) }, namedId: null };
    if (capture.status === "succeeded" && status !== 202) {
      return { seen, step: { kind: "done", outcome: { kind: "captured", capture } }, namedId: capture.id };
    }
    if (capture.status === "failed" && status !== 202) {
      return { seen, step: { kind: "done", outcome: { kind: "failed", capture } }, namedId: capture.id };
    }
    return { seen, step: { kind: "retry", retryAfterMs: retryAfterOf(answer, nowMs) }, namedId: capture.id };
  }
  const problem = problemOf(answer);
  const seen = seenOf(answer, null, problem);
  const capture = problem?.capture ?? null;
  const namedId = capture?.id ?? null;
  if (problem === null) return { seen, step: notDefinite(answer, problem, attempts, nowMs), namedId };
  if (status === 422 && problem.code === "capture_failed") {
    if (capture !== null) return { seen, step: { kind: "done", outcome: { kind: "failed", capture } }, namedId };
    return { seen, step: unexpected(answer, attempts), namedId };
  }
  if (status === 409 && problem.code === "authorization_busy") {
    return { seen, step: { kind: "retry", retryAfterMs: retryAfterOf(answer, nowMs), refused: refusalOf(problem) }, namedId };
  }
  if (status >= 400 && status <= 499 && CAPTURE_REFUSALS.includes(problem.code)) {
    return { seen, step: { kind: "done", outcome: refusalOf(problem), refusal: true }, namedId };
  }
  return { seen, step: notDefinite(answer, problem, attempts, nowMs), namedId };
}

/**
 * Decides what an answer of `POST /v1/payments/{id}/void` means: a 200 ends it
 * by the payment (`voided`, or `succeeded`: `released`, the captures kept); a
 * 202 (in flight) is asked again with the same key; 422 `void_failed`
 * (stored) is `failed`; a refusal that executed nothing is `refused`; 409
 * `authorization_busy` is asked again.
 */
export function judgeVoid(answer: Answer, attempts: number, nowMs: number = Date.now()): Judgement<VoidOutcome> {
  const { status } = answer;
  if (status >= 200 && status <= 202) {
    const payment = asPayment(parseJson(answer.body));
    const seen = seenOf(answer, payment, null);
    if (payment === null) return { seen, step: { kind: "retry", retryAfterMs: retryAfterOf(answer, nowMs) }, namedId: null };
    if (status === 200 && payment.status === "voided") {
      return { seen, step: { kind: "done", outcome: { kind: "voided", payment } }, namedId: payment.id };
    }
    if (status === 200 && payment.status === "succeeded") {
      return { seen, step: { kind: "done", outcome: { kind: "released", payment } }, namedId: payment.id };
    }
    return { seen, step: { kind: "retry", retryAfterMs: retryAfterOf(answer, nowMs) }, namedId: payment.id };
  }
  const problem = problemOf(answer);
  const seen = seenOf(answer, problem?.payment ?? null, problem);
  const namedId = problem?.payment?.id ?? null;
  if (problem === null) return { seen, step: notDefinite(answer, problem, attempts, nowMs), namedId };
  if (status === 422 && problem.code === "void_failed") {
    if (problem.payment !== null) {
      const failureCode = typeof problem.raw["failure_code"] === "string" ? problem.raw["failure_code"] : null;
      return { seen, step: { kind: "done", outcome: { kind: "failed", payment: problem.payment, failureCode } }, namedId };
    }
    return { seen, step: unexpected(answer, attempts), namedId };
  }
  if (status === 409 && problem.code === "authorization_busy") {
    return { seen, step: { kind: "retry", retryAfterMs: retryAfterOf(answer, nowMs), refused: refusalOf(problem) }, namedId };
  }
  if (status >= 400 && status <= 499 && VOID_REFUSALS.includes(problem.code)) {
    return { seen, step: { kind: "done", outcome: refusalOf(problem), refusal: true }, namedId };
  }
  return { seen, step: notDefinite(answer, problem, attempts, nowMs), namedId };
}

function unexpected<O>(answer: Answer, attempts: number): Step<O> {
  return { kind: "fail", error: new UnexpectedAnswerError(answer.status, answer.body.slice(0, 300), attempts) };
}

/**
 * An error answer that is not a definite outcome: transient statuses are
 * retried, `idempotency_key_reused` is its own error (never retried), other
 * 4xx problems are refusals.
 */
function notDefinite<O>(answer: Answer, problem: Problem | null, attempts: number, nowMs: number): Step<O> {
  if (transient(answer.status)) return { kind: "retry", retryAfterMs: retryAfterOf(answer, nowMs) };
  if (problem !== null && problem.code === "idempotency_key_reused") {
    return { kind: "fail", error: new KeyReusedError(problem, attempts) };
  }
  if (problem !== null && answer.status >= 400 && answer.status <= 499) {
    return { kind: "fail", error: new ProblemError(problem, attempts) };
  }
  return unexpected(answer, attempts);
}

/**
 * Classifies what `fetch` threw: a connection never made (nothing sent), a
 * timeout (this attempt's AbortSignal), or a lost answer.
 */
export function classifyFailure(error: unknown): { failure: FailureKind; message: string } {
  const name = errorField(error, "name");
  const chain: unknown[] = [];
  for (let e: unknown = error, i = 0; e !== undefined && e !== null && i < 8; e = errorField(e, "cause"), i++) chain.push(e);
  const root = chain[chain.length - 1];
  const message = String(errorField(root, "message") ?? root);
  if (name === "TimeoutError" || name === "AbortError" || chain.some((e) => errorField(e, "name") === "TimeoutError")) {
    return { failure: "timeout", message };
  }
  // Only a failure of the connect itself proves the request was never sent.
  // A route lost (EHOSTUNREACH, ENETUNREACH) can also hit a pooled socket
  // after the POST was written: never sent only when the connect failed.
  const connectOnly = ["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "UND_ERR_CONNECT_TIMEOUT", "EADDRNOTAVAIL"];
  const routeLost = ["EHOSTUNREACH", "ENETUNREACH"];
  const neverSent = chain.some((e) => {
    const code = errorField(e, "code");
    if (typeof code !== "string") return false;
    return connectOnly.includes(code) || (routeLost.includes(code) && errorField(e, "syscall") === "connect");
  });
  if (neverSent) return { failure: "connect", message };
  return { failure: "lost", message };
}

function errorField(value: unknown, field: string): unknown {
  return typeof value === "object" && value !== null ? (value as Record<string, unknown>)[field] : undefined;
}
