/**
 * The API's resources and requests, as the wire carries them. Money is a
 * decimal string with its currency, never a JSON number.
 *
 * The resources' types are the contract's: `contract.ts` is generated from
 * `docs/openapi.json` by openapi-typescript (`npm run contract`; a test fails
 * when it drifts from the document), and the names here are aliases of its
 * component schemas. What the client adds is what a newer server may send:
 * a history entry of an unknown `type` and a problem `code` this client does
 * not know are kept as sent, never an error.
 */

import type { components } from "./contract.js";

type Schemas = components["schemas"];

/** An amount: a decimal string with exactly the currency's minor units (`"1500.00"` RUB, `"1500"` JPY). */
export type Amount = Schemas["Amount"];

/** Builds an amount; refuses anything that is not a non-negative decimal string. */
export function amount(value: string, currency: string): Amount {
  if (typeof value !== "string" || !/^[0-9]+(\.[0-9]+)?$/.test(value)) {
    throw new TypeError(`an amount is a decimal string such as "1500.00", not ${JSON.stringify(value)}`);
  }
  if (!/^[A-Z]{3}$/.test(currency)) throw new TypeError(`a currency is an ISO 4217 code such as "RUB", not ${JSON.stringify(currency)}`);
  return { value, currency };
}

/**
 * A runtime list of every member of the union `Union`: a value outside it,
 * or a member missing (the compiler then asks for an argument naming it),
 * does not compile, so the lists follow the generated contract.
 */
function lists<Union extends string>() {
  return <const Values extends readonly Union[]>(
    values: Values,
    ..._missing: [Exclude<Union, Values[number]>] extends [never] ? [] : [missing: Exclude<Union, Values[number]>]
  ): Values => values;
}

/**
 * Every payment status: `canceled` is a payment canceled while pending (a
 * cancel, or the service gave up on it): nothing taken, the order free again.
 * An authorization (`capture_method` `manual`) is `authorized` (held, nothing
 * taken), `partially_captured` (some taken, more capturable), `succeeded`
 * (capture finished), `voided` or `expired` (released with nothing taken).
 */
export type PaymentStatus = Schemas["PaymentStatus"];
export const PAYMENT_STATUSES = lists<PaymentStatus>()([
  "pending",
  "succeeded",
  "declined",
  "canceled",
  "authorized",
  "partially_captured",
  "voided",
  "expired",
]);
/** How a payment takes its money: at once (`automatic`, the default) or authorized for captures (`manual`). */
export type CaptureMethod = Schemas["CaptureMethod"];
export const CAPTURE_METHODS = lists<CaptureMethod>()(["automatic", "manual"]);
export type CaptureStatus = Schemas["CaptureStatus"];
export const CAPTURE_STATUSES = lists<CaptureStatus>()(["pending", "succeeded", "failed"]);
/** Why an authorization's rest is released (`release_requested`, `release_ended` entries). */
export type ReleaseReason = Schemas["ReleaseReason"];
export const RELEASE_REASONS = lists<ReleaseReason>()(["void", "expiry"]);
export type PaymentRefundStatus = Schemas["PaymentRefundStatus"];
export const PAYMENT_REFUND_STATUSES = lists<PaymentRefundStatus>()(["none", "partially_refunded", "refunded"]);
export type RefundStatus = Schemas["RefundStatus"];
export const REFUND_STATUSES = lists<RefundStatus>()(["pending", "succeeded", "failed"]);

/** A payment, as the API shows it. */
export type Payment = Schemas["Payment"];
/** A refund of (part of) a payment. */
export type Refund = Schemas["Refund"];
/** One capture of (part of) an authorized payment (`cap_...`). */
export type Capture = Schemas["Capture"];

/**
 * An `application/problem+json` document (RFC 9457 and the stable `code`);
 * `code` is a string, so a code of a newer server is kept as sent.
 */
export type ProblemDocument = Omit<Schemas["Problem"], "code"> & { code: string };

/** One page of a list, newest first. */
export type List<T> = Omit<Schemas["List_Payment"], "data"> & { data: T[] };

/** What the service knows of one of the shop's keys (`GET /v1/idempotency-keys/{key}`). */
export type IdempotencyKeyInfo = Schemas["IdempotencyKey"];
export type KeyState = Schemas["KeyState"];

/** Which acquirer call a history entry is about. */
export type HistoryAcquirerCall = Schemas["HistoryAcquirerCall"];
export const HISTORY_ACQUIRER_CALLS = lists<HistoryAcquirerCall>()(["charge", "lookup", "refund", "capture", "void"]);
/** How an acquirer call ended (`refused`: the request itself refused, a 4xx; `unknown`: no definite answer; `not_sent`: certainly never reached the acquirer). */
export type HistoryCallOutcome = Schemas["HistoryCallOutcome"];
export const HISTORY_CALL_OUTCOMES = lists<HistoryCallOutcome>()(["succeeded", "declined", "refused", "not_found", "unknown", "not_sent"]);
/** Who settled a payment. */
export type HistorySettledBy = Schemas["HistorySettledBy"];
export const HISTORY_SETTLED_BY = lists<HistorySettledBy>()(["request", "webhook", "reconciler"]);
/** How far a key's operation got (`cancel_requested`: a cancel's key, its cancel written to the payment's history). */
export type KeyRecoveryPoint = Schemas["KeyRecoveryPoint"];
export const KEY_RECOVERY_POINTS = lists<KeyRecoveryPoint>()(["payment_created", "order_already_paid", "refund_created", "cancel_requested", "capture_created", "void_requested", "finished"]);

/** How often one kind of repeat of a key reached the service, and when last (RFC 3339, null if none). */
export type HistoryTally = Schemas["HistoryTally"];
/**
 * A key of the payment that still exists, and its repeats by answer:
 * `replays` (its stored answer replayed), `conflicts` (409s: its first
 * request was still running), `mismatches` (422s: reused for another request).
 */
export type HistoryKey = Schemas["HistoryKey"];

/** Every entry this client knows, tagged by `type` (the contract's `HistoryEntry`). */
export type KnownHistoryEntry = Schemas["HistoryEntry"];
export type HistoryEntryType = KnownHistoryEntry["type"];
/** The entry of one known `type`. */
export type HistoryEntryOf<T extends HistoryEntryType> = Extract<KnownHistoryEntry, { type: T }>;
export type ClaimedEntry = HistoryEntryOf<"claimed">;
export type LinkedEntry = HistoryEntryOf<"linked">;
export type TakenOverEntry = HistoryEntryOf<"taken_over">;
export type AcquirerCallEntry = HistoryEntryOf<"acquirer_call">;
export type AnsweredEntry = HistoryEntryOf<"answered">;
export type CancelRequestedEntry = HistoryEntryOf<"cancel_requested">;
export type SettledEntry = HistoryEntryOf<"settled">;
export type WebhookReceivedEntry = HistoryEntryOf<"webhook_received">;
export type RefundReservedEntry = HistoryEntryOf<"refund_reserved">;
export type RefundEndedEntry = HistoryEntryOf<"refund_ended">;
export type CaptureReservedEntry = HistoryEntryOf<"capture_reserved">;
export type CaptureEndedEntry = HistoryEntryOf<"capture_ended">;
export type ReleaseRequestedEntry = HistoryEntryOf<"release_requested">;
export type ReleaseEndedEntry = HistoryEntryOf<"release_ended">;
export type EventAttemptEntry = HistoryEntryOf<"event_attempt">;
export type EventResentEntry = HistoryEntryOf<"event_resent">;
export type KeyExpiredEntry = HistoryEntryOf<"key_expired">;
export type FindingEntry = HistoryEntryOf<"finding">;
export type FindingResolvedEntry = HistoryEntryOf<"finding_resolved">;

/** The members every history entry has, whatever its `type`. */
export interface HistoryEntryBase {
  /** Its position: increasing, not dense. */
  seq: number;
  /** When it was written (RFC 3339, the store's clock). */
  at: string;
  /** The refund it is about, when it is about one of the payment's refunds. */
  refund_id?: string | null | undefined;
}

/** An entry of a `type` this client does not know (a newer server's): the common members and the rest as sent. */
export interface UnknownHistoryEntry extends HistoryEntryBase {
  type: string;
  [member: string]: unknown;
}

/**
 * One entry of a payment's history. Narrow it with {@link isKnownHistoryEntry}
 * first, then by `type`; an unknown type is kept as sent, never an error.
 */
export type HistoryEntry = KnownHistoryEntry | UnknownHistoryEntry;

/** Every entry type this client knows (the compiler holds it to the contract's). */
export const HISTORY_ENTRY_TYPES = lists<HistoryEntryType>()([
  "claimed",
  "linked",
  "taken_over",
  "acquirer_call",
  "answered",
  "cancel_requested",
  "settled",
  "webhook_received",
  "refund_reserved",
  "refund_ended",
  "capture_reserved",
  "capture_ended",
  "release_requested",
  "release_ended",
  "event_attempt",
  "event_resent",
  "key_expired",
  "finding",
  "finding_resolved",
]);

/** Whether this client knows the entry's `type` (then its members are the contract's). */
export function isKnownHistoryEntry(entry: HistoryEntry): entry is KnownHistoryEntry {
  return (HISTORY_ENTRY_TYPES as readonly string[]).includes(entry.type);
}

/** A payment's history (`GET /v1/payments/{id}/history`): every entry oldest first, and its keys' repeats. */
export type PaymentHistory = Omit<Schemas["PaymentHistory"], "entries"> & {
  /** Every entry, oldest first. */
  entries: HistoryEntry[];
};

/** The entries of one known `type`, oldest first. */
export function historyEntries<T extends HistoryEntryType>(history: PaymentHistory, type: T): Array<HistoryEntryOf<T>> {
  return history.entries.filter((entry): entry is HistoryEntryOf<T> => isKnownHistoryEntry(entry) && entry.type === type);
}

/** The repeats of one of the payment's keys that still exists, or `undefined`. */
export function historyKey(history: PaymentHistory, key: string): HistoryKey | undefined {
  return history.keys.find((k) => k.key === key);
}

/** What an API key may do: `full` (keys included), `read_only` (every read, no POST), `payments` (money moves, reading back what they made). */
export type ApiKeyScope = Schemas["ApiKeyScope"];
export const API_KEY_SCOPES = lists<ApiKeyScope>()(["full", "read_only", "payments"]);
/** Whether an API key works now (`expired`: its expiry passed, as a roll sets on the key it replaces). */
export type ApiKeyState = Schemas["ApiKeyState"];
export const API_KEY_STATES = lists<ApiKeyState>()(["active", "expired", "revoked"]);

/**
 * One of the shop's API keys (`key_...`), as `/v1/api-keys` shows it. Its
 * `secret` is there only in the answer to the request that made it
 * ({@link Client.createApiKey}, {@link Client.rollApiKey}): the service keeps
 * only its hash, and a repeat of that request answers the key without it.
 */
export type ApiKey = Schemas["ApiKey"];

/** The body of `POST /v1/api-keys`. */
export interface CreateApiKey {
  scope: ApiKeyScope;
  /** What it is for (at most 200 characters, no control characters). */
  description?: string | undefined;
  /** When it stops working (RFC 3339 or a `Date`, in the future); never by default. */
  expiresAt?: string | Date | undefined;
}

/** The wire JSON of a key's make (members only when given), serialised once per call. */
export function createApiKeyBody(request: CreateApiKey): string {
  const expiresAt = request.expiresAt instanceof Date ? request.expiresAt.toISOString() : request.expiresAt;
  return JSON.stringify({
    scope: request.scope,
    ...(request.description === undefined ? {} : { description: request.description }),
    ...(expiresAt === undefined ? {} : { expires_at: expiresAt }),
  });
}

/** A roll: how long the old key keeps working. */
export interface RollApiKey {
  /** 0 (at once) to 604800 (7 days); the service's default (24 h) when absent. */
  expireOldInSeconds?: number | undefined;
}

/** The wire JSON of a roll: `{}`, or the old key's overlap. */
export function rollApiKeyBody(request: RollApiKey): string {
  return request.expireOldInSeconds === undefined ? "{}" : JSON.stringify({ expire_old_in_seconds: request.expireOldInSeconds });
}

/**
 * One of the shop's webhook endpoints (`we_...`), as `/v1/webhook-endpoints`
 * shows it: where its events go. Its signing `secret` is there only in the
 * answer to the request that made it ({@link Client.createWebhookEndpoint},
 * {@link Client.rollWebhookEndpointSecret}); a repeat of that request answers
 * the endpoint without it.
 */
export type WebhookEndpoint = Schemas["WebhookEndpoint"];

/** The body of `POST /v1/webhook-endpoints`. */
export interface CreateWebhookEndpoint {
  /** Where events go: `https://` with a public host (plain `http` only where the operator allows it). */
  url: string;
  /** The event types wanted (`payment.succeeded`...), or `["*"]` for every type (those added later too). */
  enabledEvents: readonly string[];
  /** What it is for (at most 200 characters). */
  description?: string | undefined;
}

/** The wire JSON of an endpoint's make (the description only when given), serialised once per call. */
export function createWebhookEndpointBody(request: CreateWebhookEndpoint): string {
  return JSON.stringify({
    url: request.url,
    enabled_events: [...request.enabledEvents],
    ...(request.description === undefined ? {} : { description: request.description }),
  });
}

/** What an update of an endpoint changes: only the fields given. */
export interface UpdateWebhookEndpoint {
  /** New event types, or `["*"]`. */
  enabledEvents?: readonly string[] | undefined;
  /** `false` pauses deliveries (open ones wait), `true` resumes them. */
  enabled?: boolean | undefined;
  /** A new description; `""` clears it. */
  description?: string | undefined;
}

/** The wire JSON of an endpoint's update: the fields given only. */
export function updateWebhookEndpointBody(request: UpdateWebhookEndpoint): string {
  return JSON.stringify({
    ...(request.enabledEvents === undefined ? {} : { enabled_events: [...request.enabledEvents] }),
    ...(request.enabled === undefined ? {} : { enabled: request.enabled }),
    ...(request.description === undefined ? {} : { description: request.description }),
  });
}

/** A secret roll: how long the old secret keeps signing beside the new one. */
export interface RollWebhookEndpointSecret {
  /** 0 (at once) to 604800 (7 days); the service's default (24 h) when absent. */
  expireOldInSeconds?: number | undefined;
}

/** The wire JSON of a secret roll: `{}`, or the old secret's overlap. */
export function rollWebhookEndpointSecretBody(request: RollWebhookEndpointSecret): string {
  return request.expireOldInSeconds === undefined ? "{}" : JSON.stringify({ expire_old_in_seconds: request.expireOldInSeconds });
}

/**
 * The closed enumerations of the model, by the name of their component schema
 * in `docs/openapi.json`; a test compares each with the schema's `enum`
 * (`ProblemCode` and `EventType` are in `problem.ts` and `webhook.ts`).
 */
export const SCHEMA_ENUMS: Readonly<Record<string, readonly string[]>> = {
  PaymentStatus: PAYMENT_STATUSES,
  PaymentRefundStatus: PAYMENT_REFUND_STATUSES,
  RefundStatus: REFUND_STATUSES,
  CaptureMethod: CAPTURE_METHODS,
  CaptureStatus: CAPTURE_STATUSES,
  ReleaseReason: RELEASE_REASONS,
  HistoryAcquirerCall: HISTORY_ACQUIRER_CALLS,
  HistoryCallOutcome: HISTORY_CALL_OUTCOMES,
  HistorySettledBy: HISTORY_SETTLED_BY,
  KeyRecoveryPoint: KEY_RECOVERY_POINTS,
  ApiKeyScope: API_KEY_SCOPES,
  ApiKeyState: API_KEY_STATES,
};

/** The body of `POST /v1/payments`. */
export interface CreatePayment {
  amount: Amount;
  /** The shop's order. One order gets at most one successful payment. */
  reference: string;
  /** The acquirer's payment method token (simulator: `tok_ok`, `tok_declined`, `tok_timeout`, `tok_slow`, ...). */
  token: string;
  /**
   * The shop's own pairs (at most 50, keys of 1 to 40 characters, values of at most 500),
   * returned on the payment. Part of the request: the same key with other metadata is refused.
   */
  metadata?: Readonly<Record<string, string>> | undefined;
  /**
   * `manual` only authorizes: the payment answers `authorized` (the amount held,
   * nothing taken) for captures and a void; `automatic` (the default, also when
   * absent) charges at once. Sent only when given; part of the request.
   */
  captureMethod?: CaptureMethod | undefined;
}

/** The wire JSON of a payment request, serialised once per call. */
export function paymentBody(request: CreatePayment): string {
  return JSON.stringify({
    amount: { value: request.amount.value, currency: request.amount.currency },
    reference: request.reference,
    payment_method: { token: request.token },
    ...(request.metadata === undefined ? {} : { metadata: request.metadata }),
    ...(request.captureMethod === undefined ? {} : { capture_method: request.captureMethod }),
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

/**
 * A capture: no amount captures all that is capturable as the final capture;
 * an amount captures that much, and more captures may follow unless `final`.
 */
export interface CreateCapture {
  amount?: Amount | undefined;
  final?: boolean | undefined;
}

/** The wire JSON of a capture request (members only when given), serialised once per call. */
export function captureBody(request: CreateCapture): string {
  return JSON.stringify({
    ...(request.amount === undefined ? {} : { amount: { value: request.amount.value, currency: request.amount.currency } }),
    ...(request.final === undefined ? {} : { final: request.final }),
  });
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
    (PAYMENT_STATUSES as readonly string[]).includes(value["status"]) &&
    isAmount(value["amount"]) &&
    typeof value["reference"] === "string";
  return ok ? (value as unknown as Payment) : null;
}

/**
 * How `payment` takes its money; `automatic` when the member is absent (an
 * answer stored before authorizations existed: a payment charged at once).
 */
export function captureMethodOf(payment: Payment): CaptureMethod {
  return payment.capture_method ?? "automatic";
}

/**
 * Whether `object` (a payment, refund, capture, webhook endpoint or merchant
 * event) is live mode's (real money, the acquirer) rather than test mode's (a
 * `sk_test_` key's, the simulator's); `true` when `livemode` is absent (an
 * answer stored before test mode existed: live).
 */
export function livemodeOf(object: { readonly livemode?: boolean | undefined }): boolean {
  return object.livemode ?? true;
}

/** What captures may still take; zero when absent (an answer stored before authorizations: charged at once). */
export function amountCapturable(payment: Payment): Amount {
  return payment.amount_capturable ?? { value: zeroLike(payment.amount.value), currency: payment.amount.currency };
}

/**
 * What was taken; when absent (an answer stored before authorizations: a
 * payment charged at once), its amount once it succeeded, else zero.
 */
export function amountCaptured(payment: Payment): Amount {
  if (payment.amount_captured !== undefined && payment.amount_captured !== null) return payment.amount_captured;
  if (payment.status === "succeeded") return payment.amount;
  return { value: zeroLike(payment.amount.value), currency: payment.amount.currency };
}

/** Zero with the minor units of `value` (`"1500.00"` → `"0.00"`). */
function zeroLike(value: string): string {
  const fraction = value.split(".")[1];
  return fraction === undefined ? "0" : `0.${"0".repeat(fraction.length)}`;
}

/** Reads a JSON value as a capture, or `null` when it is not one. */
export function asCapture(value: unknown): Capture | null {
  if (!isObject(value)) return null;
  const ok =
    typeof value["id"] === "string" &&
    typeof value["payment_id"] === "string" &&
    typeof value["status"] === "string" &&
    typeof value["final"] === "boolean" &&
    isAmount(value["amount"]);
  return ok ? (value as unknown as Capture) : null;
}

/** Reads a JSON value as an API key, or `null` when it is not one. */
export function asApiKey(value: unknown): ApiKey | null {
  if (!isObject(value)) return null;
  const ok =
    typeof value["id"] === "string" &&
    typeof value["scope"] === "string" &&
    (API_KEY_SCOPES as readonly string[]).includes(value["scope"]) &&
    typeof value["state"] === "string" &&
    (API_KEY_STATES as readonly string[]).includes(value["state"]) &&
    typeof value["created_at"] === "string";
  return ok ? (value as unknown as ApiKey) : null;
}

/** Reads a JSON value as a webhook endpoint, or `null` when it is not one. */
export function asWebhookEndpoint(value: unknown): WebhookEndpoint | null {
  if (!isObject(value)) return null;
  const events = value["enabled_events"];
  const ok =
    typeof value["id"] === "string" &&
    typeof value["url"] === "string" &&
    Array.isArray(events) &&
    events.every((e) => typeof e === "string") &&
    typeof value["enabled"] === "boolean" &&
    typeof value["created_at"] === "string";
  return ok ? (value as unknown as WebhookEndpoint) : null;
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
