/**
 * `@chargeonce/client`: the TypeScript client of the chargeonce payment API.
 *
 * - The key comes from the intent: `IdempotencyKey.forOperation(order, "pay")`.
 * - Retries only with the same key and the same body bytes.
 * - An honest outcome: `paid`, `declined`, `canceled`, `authorized`, or `uncertain` (never pay again under a new key);
 *   `cancel` ends a pending payment without charging the customer; an authorization
 *   (`authorize`) is taken by `capture` (in parts) and released by `void`.
 */
export { IdempotencyKey, KeyError, encodeKeyPart, type KeyErrorKind } from "./key.js";
export {
  DEFAULT_RETRY_POLICY,
  retryPolicy,
  noRetries,
  ceilingMs,
  delayMs,
  preferSeconds,
  parseRetryAfter,
  transient,
  type RetryPolicy,
} from "./retry.js";
export * from "./model.js";
export * from "./problem.js";
export * from "./outcome.js";
export {
  Client,
  listPairs,
  paymentPairs,
  type ClientOptions,
  type ListParams,
  type PayOptions,
  type CancelOptions,
  type CaptureOptions,
  type VoidOptions,
  type PaymentListParams,
} from "./client.js";
export * from "./webhook.js";
