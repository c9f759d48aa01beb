// Checkout: pay an order once, however often the button is pressed.
//
// First the seed article's snippet (Python, httpx) done with the platform
// `fetch` as written there: Basic auth with the shop's id and secret, the key
// `order-{id}-pay` named after the intent (never a fresh random value per
// attempt), the amount as a decimal string, a 10 s timeout. Then the same
// with `@chargeonce/client`, which adds what the snippet leaves to the
// caller: the look-up before paying, retries with the same key and bytes,
// and an honest outcome.
//
//   node checkout.js <order-id>     (CHARGEONCE_URL, SHOP_ID, SECRET_KEY)
import { pathToFileURL } from "node:url";
import { Client, IdempotencyKey, amount } from "@chargeonce/client";

const BASE_URL = process.env["CHARGEONCE_URL"] ?? "http://127.0.0.1:8080";
const SHOP_ID = process.env["SHOP_ID"] ?? "demo";
const SECRET_KEY = process.env["SECRET_KEY"] ?? "";

/** The seed's snippet, with plain fetch. */
export async function payWithFetch(orderId: string): Promise<{ status: number; replayed: boolean; body: unknown }> {
  const response = await fetch(`${BASE_URL}/v1/payments`, {
    method: "POST",
    headers: {
      Authorization: "Basic " + Buffer.from(`${SHOP_ID}:${SECRET_KEY}`).toString("base64"),
      "Idempotency-Key": `order-${orderId}-pay`,
      "Content-Type": "application/json",
    },
    body: JSON.stringify({
      amount: { value: "1500.00", currency: "RUB" },
      reference: orderId,
      // The seed leaves the payment method out; the API requires one.
      payment_method: { token: "tok_ok" },
    }),
    signal: AbortSignal.timeout(10_000),
  });
  // A repeat with the same key answers the first request's status and body.
  return {
    status: response.status,
    replayed: response.headers.get("idempotent-replayed") === "true",
    body: await response.json(),
  };
}

/** The same with the SDK. */
export async function payWithSdk(orderId: string) {
  const client = new Client(BASE_URL, SHOP_ID, SECRET_KEY);
  // forOperation(`order-${orderId}`, "pay") is `order-{id}-pay`, the snippet's key.
  const key = IdempotencyKey.forOperation(`order-${orderId}`, "pay");
  const result = await client.payOrder(key, { amount: amount("1500.00", "RUB"), reference: orderId, token: "tok_ok" });
  switch (result.outcome.kind) {
    case "paid":
      return { outcome: "paid", paymentId: result.outcome.payment.id, foundBeforePaying: result.foundBeforePaying, attempts: result.attempts.length };
    case "declined":
      return { outcome: "declined", declineCode: result.outcome.payment.decline_code ?? null };
    case "canceled":
      // Canceled (by a cancel, or the service gave up on it): nothing taken.
      return { outcome: "canceled", paymentId: result.outcome.payment.id };
    case "uncertain":
      // Maybe charged. Never pay again under a new key: retry later with this one.
      return { outcome: "uncertain", paymentId: result.outcome.paymentId ?? null };
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const orderId = process.argv[2] ?? "123";
  console.log(JSON.stringify({ fetch: await payWithFetch(orderId) }));
  console.log(JSON.stringify({ sdk: await payWithSdk(orderId) }));
}
