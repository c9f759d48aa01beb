/**
 * Verifying the merchant events chargeonce POSTs to a shop (the receiving
 * side): `Chargeonce-Signature: t=<unix seconds>,v1=<hex>[,v1=<hex>...]`,
 * HMAC-SHA256 over `"{t}.{raw body}"` with the shop's webhook secret, the
 * scheme of `chargeonce_core::webhook`. Bounded work: the header is parsed
 * first (at most 1024 bytes and 8 signatures of 64 hex digits), the
 * timestamp is checked next (no MAC for a stale one), then one MAC is
 * compared with every candidate in constant time.
 */
import { createHmac, timingSafeEqual } from "node:crypto";

/** The header the signature travels in. */
export const SIGNATURE_HEADER = "chargeonce-signature";
/** How far a signed timestamp may be from the verifier's clock: 5 minutes. */
export const TOLERANCE_SECONDS = 300;
/** The most `v1=` signatures one header may carry. */
export const MAX_SIGNATURES = 8;
/** The longest signature header accepted, in bytes. */
export const MAX_HEADER_BYTES = 1024;

export type SignatureErrorKind = "malformed" | "mismatch" | "outside_tolerance";

export class SignatureError extends Error {
  override readonly name = "SignatureError";
  constructor(
    readonly kind: SignatureErrorKind,
    message: string,
    /** `outside_tolerance`: seconds between the timestamp and now. */
    readonly ageSeconds?: number,
  ) {
    super(message);
  }
}

export interface SignatureHeader {
  timestamp: number;
  signatures: Buffer[];
}

const malformed = () =>
  new SignatureError(
    "malformed",
    `the signature header is not \`t=<unix seconds>,v1=<64 hex digits>\` (at most ${MAX_SIGNATURES} v1 parts, at most ${MAX_HEADER_BYTES} bytes)`,
  );

/** Parses `t=...,v1=...[,v1=...]`; parts of other names are ignored (future schemes). */
export function parseSignatureHeader(header: string): SignatureHeader {
  if (Buffer.byteLength(header, "utf8") > MAX_HEADER_BYTES) throw malformed();
  let timestamp: number | null = null;
  const signatures: Buffer[] = [];
  for (const part of header.split(",")) {
    const trimmed = part.trim();
    const eq = trimmed.indexOf("=");
    if (eq < 0) throw malformed();
    const name = trimmed.slice(0, eq);
    const value = trimmed.slice(eq + 1);
    if (name === "t") {
      if (timestamp !== null || !/^[0-9]{1,19}$/.test(value)) throw malformed();
      const parsed = Number(value);
      if (!Number.isSafeInteger(parsed)) throw malformed();
      timestamp = parsed;
    } else if (name === "v1") {
      if (signatures.length === MAX_SIGNATURES || !/^[0-9a-fA-F]{64}$/.test(value)) throw malformed();
      signatures.push(Buffer.from(value, "hex"));
    }
  }
  if (timestamp === null || signatures.length === 0) throw malformed();
  return { timestamp, signatures };
}

function mac(secret: string, timestamp: number, body: Uint8Array | string): Buffer {
  const hmac = createHmac("sha256", secret);
  hmac.update(`${timestamp}.`);
  hmac.update(body);
  return hmac.digest();
}

/** The header value for a body sent at `timestamp` (for tests and senders). */
export function signWebhook(secret: string, timestamp: number, body: Uint8Array | string): string {
  return `t=${timestamp},v1=${mac(secret, timestamp, body).toString("hex")}`;
}

export interface VerifyOptions {
  /** Unix seconds (now by default). */
  now?: number;
  /** Seconds either way (300 by default). */
  toleranceSeconds?: number;
}

/**
 * Checks a `Chargeonce-Signature` header against the **raw** body bytes
 * (verify before parsing the JSON). Throws {@link SignatureError}. Accepts
 * several secrets (a shop rotating its secret): one must match.
 */
export function verifyWebhook(
  secret: string | readonly string[],
  header: string | null | undefined,
  body: Uint8Array | string,
  options: VerifyOptions = {},
): void {
  const secrets = typeof secret === "string" ? [secret] : secret;
  // An empty secret signs nothing: anyone could compute its MAC.
  if (secrets.length === 0 || secrets.some((s) => s.length === 0)) {
    throw new TypeError("the webhook secret is empty: configure the shop's signing secret");
  }
  if (header === null || header === undefined) throw malformed();
  const parsed = parseSignatureHeader(header);
  const now = options.now ?? Math.floor(Date.now() / 1000);
  const tolerance = options.toleranceSeconds ?? TOLERANCE_SECONDS;
  const age = Math.abs(now - parsed.timestamp);
  if (age > tolerance) {
    throw new SignatureError("outside_tolerance", `the signature timestamp is ${age} s away from now`, age);
  }
  let matched = false;
  for (const s of secrets) {
    const expected = mac(s, parsed.timestamp, body);
    // Compare with every candidate, whichever matches.
    for (const candidate of parsed.signatures) matched = timingSafeEqual(candidate, expected) || matched;
  }
  if (!matched) throw new SignatureError("mismatch", "the signature does not match");
}

/**
 * The merchant event types this client knows (`payment.canceled`: a pending
 * payment was canceled, nothing taken). A newer server may send others.
 */
export const MERCHANT_EVENT_TYPES = [
  "payment.succeeded",
  "payment.declined",
  "payment.canceled",
  "payment.authorized",
  "payment.voided",
  "payment.expired",
  "capture.succeeded",
  "capture.failed",
  "refund.succeeded",
  "refund.failed",
] as const;
export type KnownMerchantEventType = (typeof MERCHANT_EVENT_TYPES)[number];
/** A known event type, or any other string (a newer server's): autocompletes, never narrows away. */
export type MerchantEventType = KnownMerchantEventType | (string & {});

/** A merchant event, as the shop receives it. */
export interface MerchantEvent {
  id: string;
  type: MerchantEventType;
  /**
   * `false` for test mode's events (a test webhook endpoint receives only
   * those); absent only from events stored before test mode existed, which
   * are live: read it with {@link livemodeOf}.
   */
  livemode?: boolean;
  created: number;
  data: Record<string, unknown>;
}

/** Verifies, then parses: the event, or a thrown {@link SignatureError}. */
export function parseWebhook(
  secret: string | readonly string[],
  header: string | null | undefined,
  body: Uint8Array | string,
  options: VerifyOptions = {},
): MerchantEvent {
  verifyWebhook(secret, header, body, options);
  const text = typeof body === "string" ? body : Buffer.from(body).toString("utf8");
  return JSON.parse(text) as MerchantEvent;
}
