/**
 * The API's resources and requests, as the wire carries them. Money is a
 * decimal string with its currency, never a JSON number.
 *
 * Each interface has a field table (`*_FIELDS`) typed by its keys, so the
 * compiler keeps the table and the interface equal; a test compares the
 * tables with the component schemas of `docs/openapi.json`.
 */

/** `required`: always present; `optional`: may be absent (or null). */
export type Presence = "required" | "optional";
/** A table of every field of `T`: the compiler refuses a missing or an extra one. */
export type FieldTable<T> = { readonly [K in keyof Required<T>]: undefined extends T[K] ? "optional" : "required" };

/** An amount: a decimal string with exactly the currency's minor units (`"1500.00"` RUB, `"1500"` JPY). */
export interface Amount {
  value: string;
  currency: string;
}
export const AMOUNT_FIELDS: FieldTable<Amount> = { value: "required", currency: "required" };

/** Builds an amount; refuses anything that is not a non-negative decimal string. */
export function amount(value: string, currency: string): Amount {
  if (typeof value !== "string" || !/^[0-9]+(\.[0-9]+)?$/.test(value)) {
    throw new TypeError(`an amount is a decimal string such as "1500.00", not ${JSON.stringify(value)}`);
  }
  if (!/^[A-Z]{3}$/.test(currency)) throw new TypeError(`a currency is an ISO 4217 code such as "RUB", not ${JSON.stringify(currency)}`);
  return { value, currency };
}

export type PaymentStatus = "pending" | "succeeded" | "declined";
export type PaymentRefundStatus = "none" | "partially_refunded" | "refunded";
export type RefundStatus = "pending" | "succeeded" | "failed";

/** A payment, as the API shows it. */
export interface Payment {
  id: string;
  object: "payment";
  shop_id: string;
  status: PaymentStatus;
  amount: Amount;
  reference: string;
  provider_payment_id?: string | null | undefined;
  decline_code?: string | null | undefined;
  created_at: string;
  amount_refunded: Amount;
  refund_status: PaymentRefundStatus;
}
export const PAYMENT_FIELDS: FieldTable<Payment> = {
  id: "required",
  object: "required",
  shop_id: "required",
  status: "required",
  amount: "required",
  reference: "required",
  provider_payment_id: "optional",
  decline_code: "optional",
  created_at: "required",
  amount_refunded: "required",
  refund_status: "required",
};

/** A refund of (part of) a payment. */
export interface Refund {
  id: string;
  object: "refund";
  payment_id: string;
  shop_id: string;
  status: RefundStatus;
  amount: Amount;
  provider_refund_id?: string | null | undefined;
  failure_code?: string | null | undefined;
  created_at: string;
}
export const REFUND_FIELDS: FieldTable<Refund> = {
  id: "required",
  object: "required",
  payment_id: "required",
  shop_id: "required",
  status: "required",
  amount: "required",
  provider_refund_id: "optional",
  failure_code: "optional",
  created_at: "required",
};

/** An `application/problem+json` document (RFC 9457 and the stable `code`). */
export interface ProblemDocument {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: string;
  request_id?: string | undefined;
}
export const PROBLEM_FIELDS: FieldTable<ProblemDocument> = {
  type: "required",
  title: "required",
  status: "required",
  detail: "required",
  code: "required",
  request_id: "optional",
};

/** One page of a list, newest first. */
export interface List<T> {
  object: "list";
  data: T[];
  has_more: boolean;
}
export const LIST_FIELDS: FieldTable<List<unknown>> = { object: "required", data: "required", has_more: "required" };

export type KeyState = "running" | "finished" | "parked" | string;

/** What the service knows of one of the shop's keys (`GET /v1/idempotency-keys/{key}`). */
export interface IdempotencyKeyInfo {
  object: "idempotency_key";
  key: string;
  state: KeyState;
  recovery_point: string;
  request: { method: string; path: string; fingerprint: string };
  response_status?: number | null | undefined;
  payment_id?: string | null | undefined;
  refund_id?: string | null | undefined;
  lease?: { holder?: string; expires_at?: string; [name: string]: unknown } | null | undefined;
  repeats: number;
  last_repeat_at?: string | null | undefined;
  parked_until?: string | null | undefined;
  created_at: string;
  expires_at: string;
}
export const IDEMPOTENCY_KEY_FIELDS: FieldTable<IdempotencyKeyInfo> = {
  object: "required",
  key: "required",
  state: "required",
  recovery_point: "required",
  request: "required",
  response_status: "optional",
  payment_id: "optional",
  refund_id: "optional",
  lease: "optional",
  repeats: "required",
  last_repeat_at: "optional",
  parked_until: "optional",
  created_at: "required",
  expires_at: "required",
};

/** The tables by the name of the component schema they describe. */
export const SCHEMA_TABLES: Readonly<Record<string, Readonly<Record<string, Presence>>>> = {
  Amount: AMOUNT_FIELDS,
  Payment: PAYMENT_FIELDS,
  Refund: REFUND_FIELDS,
  Problem: PROBLEM_FIELDS,
  List: LIST_FIELDS,
  IdempotencyKey: IDEMPOTENCY_KEY_FIELDS,
};

/** The body of `POST /v1/payments`. */
export interface CreatePayment {
  amount: Amount;
  /** The shop's order. One order gets at most one successful payment. */
  reference: string;
  /** The acquirer's payment method token (simulator: `tok_ok`, `tok_declined`, `tok_timeout`, `tok_slow`, ...). */
  token: string;
}

/** The wire JSON of a payment request, serialised once per call. */
export function paymentBody(request: CreatePayment): string {
  return JSON.stringify({
    amount: { value: request.amount.value, currency: request.amount.currency },
    reference: request.reference,
    payment_method: { token: request.token },
  });
}

/** A refund: no amount refunds what is left, an amount refunds part. */
export interface CreateRefund {
  amount?: Amount | undefined;
}

export function refundBody(request: CreateRefund): string {
  return request.amount === undefined
    ? "{}"
    : JSON.stringify({ amount: { value: request.amount.value, currency: request.amount.currency } });
}

/** One charge in the simulator's ledger (`GET /sim/ledger`, a test tool). */
export interface LedgerCharge {
  id: string;
  payment_id: string;
  reference: string;
  shop_id: string;
  amount: Amount;
  status: string;
  [name: string]: unknown;
}
export interface Ledger {
  charges: LedgerCharge[];
  total_succeeded: { currency: string; amount: string; count: number }[];
}

/** Reads a JSON value as a payment, or `null` when it is not one. */
export function asPayment(value: unknown): Payment | null {
  if (!isObject(value)) return null;
  const ok =
    typeof value["id"] === "string" &&
    typeof value["status"] === "string" &&
    ["pending", "succeeded", "declined"].includes(value["status"]) &&
    isAmount(value["amount"]) &&
    typeof value["reference"] === "string";
  return ok ? (value as unknown as Payment) : null;
}

/** Reads a JSON value as a refund, or `null` when it is not one. */
export function asRefund(value: unknown): Refund | null {
  if (!isObject(value)) return null;
  const ok =
    typeof value["id"] === "string" &&
    typeof value["payment_id"] === "string" &&
    typeof value["status"] === "string" &&
    isAmount(value["amount"]);
  return ok ? (value as unknown as Refund) : null;
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isAmount(value: unknown): value is Amount {
  return isObject(value) && typeof value["value"] === "string" && typeof value["currency"] === "string";
}
