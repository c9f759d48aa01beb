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

/**
 * Every payment status: `canceled` is a payment canceled while pending (a
 * cancel, or the service gave up on it): nothing taken, the order free again.
 */
export const PAYMENT_STATUSES = ["pending", "succeeded", "declined", "canceled"] as const;
export type PaymentStatus = (typeof PAYMENT_STATUSES)[number];
export const PAYMENT_REFUND_STATUSES = ["none", "partially_refunded", "refunded"] as const;
export type PaymentRefundStatus = (typeof PAYMENT_REFUND_STATUSES)[number];
export const REFUND_STATUSES = ["pending", "succeeded", "failed"] as const;
export type RefundStatus = (typeof REFUND_STATUSES)[number];

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

/** Which acquirer call a history entry is about. */
export const HISTORY_ACQUIRER_CALLS = ["charge", "lookup", "refund"] as const;
export type HistoryAcquirerCall = (typeof HISTORY_ACQUIRER_CALLS)[number];
/** How an acquirer call ended (`refused`: the request itself refused, a 4xx; `unknown`: no definite answer; `not_sent`: certainly never reached the acquirer). */
export const HISTORY_CALL_OUTCOMES = ["succeeded", "declined", "refused", "not_found", "unknown", "not_sent"] as const;
export type HistoryCallOutcome = (typeof HISTORY_CALL_OUTCOMES)[number];
/** Who settled a payment. */
export const HISTORY_SETTLED_BY = ["request", "webhook", "reconciler"] as const;
export type HistorySettledBy = (typeof HISTORY_SETTLED_BY)[number];
/** How far a key's operation got (`cancel_requested`: a cancel's key, its cancel written to the payment's history). */
export const KEY_RECOVERY_POINTS = ["payment_created", "order_already_paid", "refund_created", "cancel_requested", "finished"] as const;
export type KeyRecoveryPoint = (typeof KEY_RECOVERY_POINTS)[number];

/** How often one kind of repeat of a key reached the service, and when last (RFC 3339, null if none). */
export interface HistoryTally {
  count: number;
  last_at?: string | null | undefined;
}
export const HISTORY_TALLY_FIELDS: FieldTable<HistoryTally> = { count: "required", last_at: "optional" };

/**
 * A key of the payment that still exists, and its repeats by answer:
 * `replays` (its stored answer replayed), `conflicts` (409s: its first
 * request was still running), `mismatches` (422s: reused for another request).
 */
export interface HistoryKey {
  key: string;
  replays: HistoryTally;
  conflicts: HistoryTally;
  mismatches: HistoryTally;
}
export const HISTORY_KEY_FIELDS: FieldTable<HistoryKey> = {
  key: "required",
  replays: "required",
  conflicts: "required",
  mismatches: "required",
};

/** The members every history entry has, whatever its `type`. */
export interface HistoryEntryBase {
  /** Its position: increasing, not dense. */
  seq: number;
  /** When it was written (RFC 3339, the store's clock). */
  at: string;
  /** The refund it is about, when it is about one of the payment's refunds. */
  refund_id?: string | null | undefined;
}

/** The first request with `key` claimed it and created the payment. */
export interface ClaimedEntry extends HistoryEntryBase {
  type: "claimed";
  key: string;
  instance: string;
}
/** A request with `key` found the order already paid (or being paid) by this payment and was linked to it: nothing was charged. */
export interface LinkedEntry extends HistoryEntryBase {
  type: "linked";
  key: string;
  instance: string;
}
/** An unfinished key's expired lease was taken over (by a retry or the completer), to resume from `recovery_point`. */
export interface TakenOverEntry extends HistoryEntryBase {
  type: "taken_over";
  key: string;
  instance: string;
  recovery_point: KeyRecoveryPoint;
}
/** One acquirer call ended. */
export interface AcquirerCallEntry extends HistoryEntryBase {
  type: "acquirer_call";
  call: HistoryAcquirerCall;
  outcome: HistoryCallOutcome;
  latency_ms: number;
  /** The key the acquirer saw (the same on every attempt). */
  acquirer_key: string;
  instance: string;
  reason?: string | null | undefined;
}
/** The key's final answer (HTTP `status`) was stored; replayed from now on. */
export interface AnsweredEntry extends HistoryEntryBase {
  type: "answered";
  key: string;
  status: number;
}
/** The payment is to be canceled: its charge is only looked up from now on, never sent again (`key`: the cancel's; absent when the service gave up on it). */
export interface CancelRequestedEntry extends HistoryEntryBase {
  type: "cancel_requested";
  key?: string | null | undefined;
  instance: string;
}
/** The payment left `pending` for its final `status`: by a request (`key`), an acquirer webhook (`event_id`) or the reconciler. */
export interface SettledEntry extends HistoryEntryBase {
  type: "settled";
  status: PaymentStatus;
  by: HistorySettledBy;
  key?: string | null | undefined;
  event_id?: string | null | undefined;
}
/** An authentic acquirer webhook about the payment that changed nothing. */
export interface WebhookReceivedEntry extends HistoryEntryBase {
  type: "webhook_received";
  event_id: string;
  kind: string;
}
/** A refund's `amount` was reserved on the payment (`refund_id` names the refund). */
export interface RefundReservedEntry extends HistoryEntryBase {
  type: "refund_reserved";
  key: string;
  amount: Amount;
  instance: string;
}
/** A refund reached its final `status`. */
export interface RefundEndedEntry extends HistoryEntryBase {
  type: "refund_ended";
  status: RefundStatus;
}
/** One delivery attempt of a merchant event about the payment (`result`: `delivered`, `failed`, `given_up`; `status`: the shop's HTTP status). */
export interface EventAttemptEntry extends HistoryEntryBase {
  type: "event_attempt";
  event_id: string;
  event_type: string;
  attempt: number;
  result: string;
  status?: number | null | undefined;
}
/** An operator made a merchant event due again. */
export interface EventResentEntry extends HistoryEntryBase {
  type: "event_resent";
  event_id: string;
}
/** A key of the payment expired and was swept: how often it had been repeated. */
export interface KeyExpiredEntry extends HistoryEntryBase {
  type: "key_expired";
  key: string;
  replays: HistoryTally;
  conflicts: HistoryTally;
  mismatches: HistoryTally;
}
/** The reconciler found a disagreement about the payment (`duplicate_charge`, `orphan_charge`, `missing_charge`, `mismatch`). */
export interface FindingEntry extends HistoryEntryBase {
  type: "finding";
  finding_id: number;
  kind: string;
}
/** A finding about the payment was resolved (`refunded` or `manual`). */
export interface FindingResolvedEntry extends HistoryEntryBase {
  type: "finding_resolved";
  finding_id: number;
  how: string;
}

/** Every entry this client knows, tagged by `type`. */
export type KnownHistoryEntry =
  | ClaimedEntry
  | LinkedEntry
  | TakenOverEntry
  | AcquirerCallEntry
  | AnsweredEntry
  | CancelRequestedEntry
  | SettledEntry
  | WebhookReceivedEntry
  | RefundReservedEntry
  | RefundEndedEntry
  | EventAttemptEntry
  | EventResentEntry
  | KeyExpiredEntry
  | FindingEntry
  | FindingResolvedEntry;
export type HistoryEntryType = KnownHistoryEntry["type"];

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

const ENTRY_BASE = { seq: "required", at: "required", refund_id: "optional" } as const;
/** The field table of each entry type (the common members and the type's own), by `type`. */
export const HISTORY_ENTRY_TABLES: { readonly [T in HistoryEntryType]: FieldTable<Extract<KnownHistoryEntry, { type: T }>> } = {
  claimed: { ...ENTRY_BASE, type: "required", key: "required", instance: "required" },
  linked: { ...ENTRY_BASE, type: "required", key: "required", instance: "required" },
  taken_over: { ...ENTRY_BASE, type: "required", key: "required", instance: "required", recovery_point: "required" },
  acquirer_call: {
    ...ENTRY_BASE,
    type: "required",
    call: "required",
    outcome: "required",
    latency_ms: "required",
    acquirer_key: "required",
    instance: "required",
    reason: "optional",
  },
  answered: { ...ENTRY_BASE, type: "required", key: "required", status: "required" },
  cancel_requested: { ...ENTRY_BASE, type: "required", key: "optional", instance: "required" },
  settled: { ...ENTRY_BASE, type: "required", status: "required", by: "required", key: "optional", event_id: "optional" },
  webhook_received: { ...ENTRY_BASE, type: "required", event_id: "required", kind: "required" },
  refund_reserved: { ...ENTRY_BASE, type: "required", key: "required", amount: "required", instance: "required" },
  refund_ended: { ...ENTRY_BASE, type: "required", status: "required" },
  event_attempt: {
    ...ENTRY_BASE,
    type: "required",
    event_id: "required",
    event_type: "required",
    attempt: "required",
    result: "required",
    status: "optional",
  },
  event_resent: { ...ENTRY_BASE, type: "required", event_id: "required" },
  key_expired: {
    ...ENTRY_BASE,
    type: "required",
    key: "required",
    replays: "required",
    conflicts: "required",
    mismatches: "required",
  },
  finding: { ...ENTRY_BASE, type: "required", finding_id: "required", kind: "required" },
  finding_resolved: { ...ENTRY_BASE, type: "required", finding_id: "required", how: "required" },
};
/** The members every entry has. */
export const HISTORY_ENTRY_FIELDS: FieldTable<HistoryEntryBase> = ENTRY_BASE;
/** The entry types this client knows. */
export const HISTORY_ENTRY_TYPES: readonly HistoryEntryType[] = Object.keys(HISTORY_ENTRY_TABLES) as HistoryEntryType[];

/** Whether this client knows the entry's `type` (then `type` narrows it to its interface). */
export function isKnownHistoryEntry(entry: HistoryEntry): entry is KnownHistoryEntry {
  return Object.prototype.hasOwnProperty.call(HISTORY_ENTRY_TABLES, entry.type);
}

/** A payment's history (`GET /v1/payments/{id}/history`): every entry oldest first, and its keys' repeats. */
export interface PaymentHistory {
  object: "payment_history";
  payment_id: string;
  /** Every entry, oldest first. */
  entries: HistoryEntry[];
  /** The payment's keys that still exist and their repeats (a swept key's are in its `key_expired` entry). */
  keys: HistoryKey[];
}
export const PAYMENT_HISTORY_FIELDS: FieldTable<PaymentHistory> = {
  object: "required",
  payment_id: "required",
  entries: "required",
  keys: "required",
};

/** The entries of one known `type`, oldest first. */
export function historyEntries<T extends HistoryEntryType>(
  history: PaymentHistory,
  type: T,
): Array<Extract<KnownHistoryEntry, { type: T }>> {
  return history.entries.filter(
    (entry): entry is Extract<KnownHistoryEntry, { type: T }> => isKnownHistoryEntry(entry) && entry.type === type,
  );
}

/** The repeats of one of the payment's keys that still exists, or `undefined`. */
export function historyKey(history: PaymentHistory, key: string): HistoryKey | undefined {
  return history.keys.find((k) => k.key === key);
}

/** The tables by the name of the component schema they describe. */
export const SCHEMA_TABLES: Readonly<Record<string, Readonly<Record<string, Presence>>>> = {
  Amount: AMOUNT_FIELDS,
  Payment: PAYMENT_FIELDS,
  Refund: REFUND_FIELDS,
  Problem: PROBLEM_FIELDS,
  List: LIST_FIELDS,
  IdempotencyKey: IDEMPOTENCY_KEY_FIELDS,
  PaymentHistory: PAYMENT_HISTORY_FIELDS,
  HistoryKey: HISTORY_KEY_FIELDS,
  HistoryTally: HISTORY_TALLY_FIELDS,
};

/**
 * The closed enumerations of the model, by the name of their component schema
 * in `docs/openapi.json`; a test compares each with the schema's `enum`
 * (`ProblemCode` and `EventType` are in `problem.ts` and `webhook.ts`).
 */
export const SCHEMA_ENUMS: Readonly<Record<string, readonly string[]>> = {
  PaymentStatus: PAYMENT_STATUSES,
  PaymentRefundStatus: PAYMENT_REFUND_STATUSES,
  RefundStatus: REFUND_STATUSES,
  HistoryAcquirerCall: HISTORY_ACQUIRER_CALLS,
  HistoryCallOutcome: HISTORY_CALL_OUTCOMES,
  HistorySettledBy: HISTORY_SETTLED_BY,
  KeyRecoveryPoint: KEY_RECOVERY_POINTS,
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
    (PAYMENT_STATUSES as readonly string[]).includes(value["status"]) &&
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
