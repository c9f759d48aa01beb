/**
 * When and how long to retry: exponential backoff with full jitter, the
 * server's `Retry-After`, and a total time budget. Pure: no I/O, the random
 * source and the clock are parameters.
 */

/** How the client retries. Every retry sends the same key and body bytes. */
export interface RetryPolicy {
  /** The total time one call may take, attempts and waits included (60 000 ms). */
  readonly budgetMs: number;
  /** The longest one attempt may take before it counts as a lost answer (20 000 ms). */
  readonly attemptTimeoutMs: number;
  /** The first backoff step (100 ms). */
  readonly baseDelayMs: number;
  /** The largest backoff step (5 000 ms). */
  readonly maxDelayMs: number;
  /** The most attempts one call makes (20); 1 means no retries. */
  readonly maxAttempts: number;
  /**
   * Sent as `Prefer: wait=N` on payments (10 000 ms): a repeat that finds the
   * first request still running waits on the server instead of getting 409.
   * Capped by the attempt timeout; `null` sends no `Prefer`.
   */
  readonly preferWaitMs: number | null;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = Object.freeze({
  budgetMs: 60_000,
  attemptTimeoutMs: 20_000,
  baseDelayMs: 100,
  maxDelayMs: 5_000,
  maxAttempts: 20,
  preferWaitMs: 10_000,
});

/** The default policy with some fields changed (`maxAttempts` at least 1). */
export function retryPolicy(changes: Partial<RetryPolicy> = {}): RetryPolicy {
  const policy = { ...DEFAULT_RETRY_POLICY, ...changes };
  return Object.freeze({ ...policy, maxAttempts: Math.max(1, Math.floor(policy.maxAttempts)) });
}

/** One attempt, no retries (what a naive client does; for demos and tests). */
export function noRetries(): RetryPolicy {
  return retryPolicy({ maxAttempts: 1 });
}

/**
 * The backoff ceiling before attempt `failed + 1`, after `failed` failures
 * (1-based): `min(maxDelay, baseDelay * 2^(failed-1))`.
 */
export function ceilingMs(policy: RetryPolicy, failed: number): number {
  const exponent = Math.min(Math.max(failed - 1, 0), 30);
  return Math.min(policy.baseDelayMs * 2 ** exponent, policy.maxDelayMs);
}

/**
 * The wait before the next attempt: full jitter under the ceiling (a uniform
 * point in `[0, ceiling]`), but never shorter than `Retry-After`.
 * `random` returns a number in `[0, 1)`, like `Math.random`.
 */
export function delayMs(
  policy: RetryPolicy,
  failed: number,
  retryAfterMs: number | null,
  random: () => number = Math.random,
): number {
  const ceiling = ceilingMs(policy, failed);
  const jittered = Math.floor(random() * (ceiling + 1));
  return Math.max(jittered, retryAfterMs ?? 0);
}

/**
 * The `Prefer: wait=N` seconds for an attempt limited to `attemptMs`: at most
 * the policy's wait and one second less than the attempt may take (so the
 * server answers before the client gives up); `null` when that is under 1 s.
 */
export function preferSeconds(policy: RetryPolicy, attemptMs: number): number | null {
  if (policy.preferWaitMs === null) return null;
  const wanted = Math.floor(policy.preferWaitMs / 1000);
  const fits = Math.max(Math.floor(attemptMs / 1000) - 1, 0);
  const seconds = Math.min(wanted, fits);
  return seconds > 0 ? seconds : null;
}

/** Reads `Retry-After` (delta-seconds or an HTTP date, RFC 9110 §10.2.3) as milliseconds. */
export function parseRetryAfter(value: string, nowMs: number = Date.now()): number | null {
  const text = value.trim();
  if (text.length > 0 && /^[0-9]+$/.test(text)) return Number(text) * 1000;
  // An IMF-fixdate (or the obsolete forms Date.parse reads); never a bare number.
  if (!/[A-Za-z]/.test(text)) return null;
  const at = Date.parse(text);
  if (Number.isNaN(at)) return null;
  return Math.max(at - nowMs, 0);
}

/** Whether a status is worth another attempt with the same request. */
export function transient(status: number): boolean {
  return status === 408 || status === 409 || status === 425 || status === 429 || (status >= 500 && status <= 599);
}
