/**
 * The `Idempotency-Key`: a client-chosen name for one business operation.
 *
 * Pure: no I/O. Mirrors `chargeonce_core::IdempotencyKey` point for point
 * (validation, `forOperation`'s percent-encoding, the random key's form).
 */
import { createHash, randomBytes } from "node:crypto";

/** Why a raw key value was refused. */
export type KeyErrorKind = "empty" | "too_long" | "invalid_character";

/** A key that is not 1 to 255 visible ASCII characters. */
export class KeyError extends Error {
  override readonly name = "KeyError";
  constructor(
    readonly kind: KeyErrorKind,
    message: string,
    /** `too_long`: the length; `invalid_character`: the zero-based byte offset. */
    readonly at?: number,
  ) {
    super(message);
  }
}

const encoder = new TextEncoder();

function visible(byte: number): boolean {
  return byte >= 0x21 && byte <= 0x7e;
}

function validate(key: string): void {
  const bytes = encoder.encode(key);
  if (bytes.length === 0) throw new KeyError("empty", "the key is empty");
  const bad = bytes.findIndex((b) => !visible(b));
  if (bad >= 0) {
    throw new KeyError(
      "invalid_character",
      `the key has a character that is not visible ASCII at position ${bad}`,
      bad,
    );
  }
  if (bytes.length > IdempotencyKey.MAX_LEN) {
    throw new KeyError(
      "too_long",
      `the key is ${bytes.length} characters long; at most ${IdempotencyKey.MAX_LEN} are allowed`,
      bytes.length,
    );
  }
}

/** Percent-encodes every UTF-8 byte that is not visible ASCII, and `%` itself. */
export function encodeKeyPart(text: string): string {
  let out = "";
  for (const byte of encoder.encode(text)) {
    if (visible(byte) && byte !== 0x25) out += String.fromCharCode(byte);
    else out += "%" + byte.toString(16).toUpperCase().padStart(2, "0");
  }
  return out;
}

/**
 * A valid idempotency key: 1 to 255 visible ASCII characters. It can only be
 * built valid. `toString()` and `JSON` never show the raw key (it may carry
 * customer data); use {@link IdempotencyKey.value} where the key is needed.
 */
export class IdempotencyKey {
  /** The longest key accepted, in characters. */
  static readonly MAX_LEN = 255;

  readonly #value: string;

  private constructor(value: string) {
    this.#value = value;
  }

  /** Validates a key given as plain text. Throws {@link KeyError}. */
  static of(key: string): IdempotencyKey {
    validate(key);
    return new IdempotencyKey(key);
  }

  /**
   * The key of one business operation on one subject: `{subject}-{operation}`,
   * each percent-encoded (UTF-8 bytes outside visible ASCII, and `%`).
   * Make keys from the *intent* (pay order 123), never the *attempt*: every
   * retry, from this process or after a restart, computes the same key.
   *
   * `forOperation("order-123", "pay")` is `order-123-pay`;
   * `forOperation("заказ 7", "pay")` is `%D0%B7%D0%B0%D0%BA%D0%B0%D0%B7%207-pay`.
   * Throws {@link KeyError} when either part is empty or the key is too long.
   */
  static forOperation(subject: string, operation: string): IdempotencyKey {
    const key = `${encodeKeyPart(subject)}-${encodeKeyPart(operation)}`;
    if (subject.length === 0 || operation.length === 0) {
      throw new KeyError("empty", "the key is empty");
    }
    return IdempotencyKey.of(key);
  }

  /**
   * A random key (`rnd-` and 32 hex digits), good **only while this process
   * lives and only if every retry reuses this very value**. After a crash or
   * a redeploy the next process cannot find it again, makes a new one, and
   * the customer is charged twice. Prefer {@link IdempotencyKey.forOperation}.
   */
  static randomForThisProcessOnly(): IdempotencyKey {
    return new IdempotencyKey(`rnd-${randomBytes(16).toString("hex")}`);
  }

  /** The key as chosen, for the header. */
  get value(): string {
    return this.#value;
  }

  equals(other: IdempotencyKey): boolean {
    return this.#value === other.#value;
  }

  /**
   * A short, stable, non-reversible name for the key, safe to put in logs:
   * the first 12 hex digits of its SHA-256 (as Rust's `log_id`).
   */
  logId(): string {
    return createHash("sha256").update(this.#value, "utf8").digest("hex").slice(0, 12);
  }

  /** Never the raw key: `IdempotencyKey(#<logId>)`. */
  toString(): string {
    return `IdempotencyKey(#${this.logId()})`;
  }

  toJSON(): string {
    return this.toString();
  }
}
