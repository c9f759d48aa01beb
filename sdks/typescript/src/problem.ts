/**
 * The API's errors: RFC 9457 problem documents, typed by their stable
 * `code`, and the errors a call throws. Pure: no I/O.
 */
import { asCapture, asPayment, asRefund, isObject, type Capture, type Payment, type Refund } from "./model.js";

/** The codes this client knows. A server may send others: they are kept as strings. */
export const PROBLEM_CODES = [
  "missing_idempotency_key",
  "invalid_idempotency_key",
  "duplicate_idempotency_key",
  "malformed_json",
  "missing_parameter",
  "unauthorized",
  "api_key_revoked",
  "api_key_expired",
  "insufficient_scope",
  "api_key_limit_reached",
  "api_key_inactive",
  "webhook_endpoint_limit_reached",
  "no_webhook_endpoint",
  "payment_declined",
  "not_found",
  "method_not_allowed",
  "request_in_progress",
  "order_already_paid",
  "payment_canceled",
  "payment_not_cancelable",
  "payload_too_large",
  "unsupported_media_type",
  "idempotency_key_reused",
  "invalid_request",
  "invalid_amount",
  "unsupported_currency",
  "store_unavailable",
  "acquirer_unavailable",
  "missing_signature",
  "invalid_signature",
  "stale_signature",
  "webhooks_disabled",
  "refund_exceeds_amount",
  "payment_not_refundable",
  "currency_mismatch",
  "refund_failed",
  "capture_exceeds_capturable",
  "payment_not_capturable",
  "payment_not_voidable",
  "authorization_busy",
  "capture_failed",
  "void_failed",
  "rate_limited",
  "too_many_requests",
  "body_timeout",
  "request_timeout",
  "store_overloaded",
  "internal_error",
  "bad_request",
  "http_error",
  "invalid_parameter",
  "invalid_cursor",
] as const;

export type KnownProblemCode = (typeof PROBLEM_CODES)[number];
/** A known code, or any other string (a newer server's, a proxy's): autocompletes, never narrows away. */
export type ProblemCode = KnownProblemCode | (string & {});

export function isKnownCode(code: string): code is KnownProblemCode {
  return (PROBLEM_CODES as readonly string[]).includes(code);
}

/** One problem answer, read. */
export interface Problem {
  code: ProblemCode;
  /** Whether this client knows the code. */
  known: boolean;
  status: number;
  type: string;
  title: string;
  detail: string;
  /** The answer's `request_id` member, or its `Request-Id` header. */
  requestId: string | null;
  /** `payment_declined`, `acquirer_unavailable`, `order_already_paid`, `payment_canceled`, `payment_not_cancelable` and `void_failed` carry the payment. */
  payment: Payment | null;
  /** `refund_failed` carries the refund. */
  refund: Refund | null;
  /** `capture_failed` (and `acquirer_unavailable` of a capture) carries the capture. */
  capture: Capture | null;
  /** The field a validation problem is about, when it names one. */
  field: string | null;
  /** Every member of the document, as sent. */
  raw: Record<string, unknown>;
}

/**
 * Reads a problem document; `null` when the body is not a JSON object with a
 * string `code` (an answer from something other than the API, such as a proxy).
 */
export function parseProblem(httpStatus: number, body: string, requestIdHeader: string | null = null): Problem | null {
  let raw: unknown;
  try {
    raw = JSON.parse(body);
  } catch {
    return null;
  }
  if (!isObject(raw) || typeof raw["code"] !== "string") return null;
  const text = (name: string): string | null => (typeof raw[name] === "string" ? (raw[name] as string) : null);
  const status = typeof raw["status"] === "number" && raw["status"] !== 0 ? raw["status"] : httpStatus;
  const code = raw["code"];
  return {
    code,
    known: isKnownCode(code),
    status,
    type: text("type") ?? "",
    title: text("title") ?? "",
    detail: text("detail") ?? "",
    requestId: text("request_id") ?? requestIdHeader,
    payment: asPayment(raw["payment"]),
    refund: asRefund(raw["refund"]),
    capture: asCapture(raw["capture"]),
    field: text("field"),
    raw,
  };
}

/** The base of every error a call throws. */
export class ChargeonceError extends Error {
  override name = "ChargeonceError";
  constructor(
    message: string,
    /** How many attempts the call made. */
    readonly attempts: number,
  ) {
    super(message);
  }
}

/**
 * A refusal carrying the server's problem document (400, 401, 404, 422, ...):
 * fix the request; retrying the same bytes gets the same answer.
 */
export class ProblemError extends ChargeonceError {
  override name = "ProblemError";
  readonly code: ProblemCode;
  readonly status: number;
  readonly requestId: string | null;
  readonly detail: string;
  readonly title: string;
  constructor(
    readonly problem: Problem,
    attempts: number,
    message?: string,
  ) {
    super(message ?? `${problem.status} ${problem.code}: ${problem.title}${problem.detail ? ` (${problem.detail})` : ""}`, attempts);
    this.code = problem.code;
    this.status = problem.status;
    this.requestId = problem.requestId;
    this.detail = problem.detail;
    this.title = problem.title;
  }
}

/**
 * `422 idempotency_key_reused`: this key was first used for another request
 * (another amount, order or token). A bug in the caller; nothing was
 * executed. Never retried, and never "fixed" with a fresh key.
 */
export class KeyReusedError extends ProblemError {
  override name = "KeyReusedError";
  constructor(problem: Problem, attempts: number) {
    super(
      problem,
      attempts,
      `the idempotency key was first used for a different request (a client bug; nothing was executed): ${problem.detail}`,
    );
  }
}

/**
 * `409 order_already_paid`: the order already has a payment (succeeded, or
 * pending) for another amount or currency, so nothing was charged for this
 * request. Also thrown when an answer (or `payOrder`'s look-up) names a
 * payment that is not the one asked for. Never "paid": the cart and the
 * payment disagree, and a person must look. Never retried.
 */
export class OrderAlreadyPaidError extends ProblemError {
  override name = "OrderAlreadyPaidError";
  /** The order's payment. */
  readonly payment: Payment;
  constructor(problem: Problem, payment: Payment, attempts: number) {
    super(problem, attempts, `order ${payment.reference} already has a ${payment.status} payment ${payment.id} of ${payment.amount.value} ${payment.amount.currency}: not the one asked for`);
    this.payment = payment;
  }

  /** Found by the client itself: an answer, or a look-up, about another payment of the order. */
  static of(payment: Payment, attempts: number): OrderAlreadyPaidError {
    const problem: Problem = {
      code: "order_already_paid",
      known: true,
      status: 409,
      type: "urn:chargeonce:problem:order_already_paid",
      title: "The order is already paid with another amount",
      detail: `order ${payment.reference} has a ${payment.status} payment ${payment.id} of ${payment.amount.value} ${payment.amount.currency}`,
      requestId: null,
      payment,
      refund: null,
      capture: null,
      field: null,
      raw: {},
    };
    return new OrderAlreadyPaidError(problem, payment, attempts);
  }
}

/**
 * `409 payment_not_cancelable`: the payment was already final when the cancel
 * came, so the cancel changed nothing. `payment` says which: `succeeded` (the
 * customer was charged: refund it instead) or `declined` (nothing was taken).
 * A stored answer (the same key replays it); never retried.
 */
export class PaymentNotCancelableError extends ProblemError {
  override name = "PaymentNotCancelableError";
  /** The payment as it was when the cancel came (`null` only if the answer lacked it). */
  readonly payment: Payment | null;
  constructor(problem: Problem, attempts: number) {
    const p = problem.payment;
    super(
      problem,
      attempts,
      p === null
        ? `409 payment_not_cancelable: the payment was already final: ${problem.detail}`
        : `payment ${p.id} was already ${p.status} when the cancel came: not cancelable${p.status === "succeeded" ? " (refund it instead)" : ""}`,
    );
    this.payment = p;
  }
}

/** An answer that is neither the API's resource nor its problem document (a proxy's page). */
export class UnexpectedAnswerError extends ChargeonceError {
  override name = "UnexpectedAnswerError";
  constructor(
    readonly status: number,
    readonly body: string,
    attempts: number,
  ) {
    super(`unexpected answer ${status}: ${body.slice(0, 300)}`, attempts);
  }
}

/** A read (not a payment) got no usable answer within the budget. */
export class UnavailableError extends ChargeonceError {
  override name = "UnavailableError";
  constructor(
    readonly last: string,
    attempts: number,
  ) {
    super(`no answer within the retry budget after ${attempts} attempts: ${last}`, attempts);
  }
}
