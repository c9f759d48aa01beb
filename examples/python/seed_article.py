"""The seed article's snippet ("Ключ идемпотентности: защита от повторного списания"),
working against chargeonce, then the same payment with the Python SDK.

    python examples/python/seed_article.py --base-url http://127.0.0.1:8080 \
        --shop demo --secret sk_... --order 123

The article's request, as written there, with what it leaves open filled in:
the URL (``{base}/v1/payments``) and the card token (``payment_method``, which
chargeonce requires; the simulator's ``tok_ok``). The key is the article's
``order-{order_id}-pay``: from the intent, never random, so a retry (a timeout,
a resubmitted form) is answered with the first result instead of a second
charge.
"""
from __future__ import annotations

import argparse
import os
import sys

import httpx

from chargeonce import Amount, Client, IdempotencyKey, Paid


def seed_way(base_url: str, shop_id: str, secret_key: str, order_id: str) -> httpx.Response:
    """The article's snippet, as close to the text as chargeonce allows."""
    SHOP_ID, SECRET_KEY = shop_id, secret_key
    r = httpx.post(
        f"{base_url}/v1/payments",
        auth=(SHOP_ID, SECRET_KEY),
        headers={"Idempotency-Key": f"order-{order_id}-pay"},
        json={
            "amount": {"value": "1500.00", "currency": "RUB"},
            "reference": order_id,
            "payment_method": {"token": "tok_ok"},
        },
        timeout=10.0,
    )
    return r


def sdk_way(base_url: str, shop_id: str, secret_key: str, order_id: str) -> Paid:
    """The same payment with the SDK: the key from the order, retries with the
    same key and body, an outcome instead of a status code."""
    with Client(base_url, shop_id, secret_key) as client:
        key = IdempotencyKey.for_operation(f"order-{order_id}", "pay")  # "order-{id}-pay", as in the article
        result = client.pay(key, Amount.of("1500.00", "RUB"), order_id, "tok_ok")
        if not isinstance(result.outcome, Paid):
            raise SystemExit(f"not paid: {result.outcome}")
        return result.outcome


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", default=os.environ.get("CHARGEONCE_URL", "http://127.0.0.1:8080"))
    parser.add_argument("--shop", default=os.environ.get("CHARGEONCE_SHOP", "demo"))
    parser.add_argument("--secret", default=os.environ.get("CHARGEONCE_SECRET"))
    parser.add_argument("--order", default="123")
    args = parser.parse_args()
    if not args.secret:
        parser.error("--secret (or CHARGEONCE_SECRET) is required")
    base = args.base_url.rstrip("/")

    first = seed_way(base, args.shop, args.secret, args.order)
    again = seed_way(base, args.shop, args.secret, args.order)
    print(f"article: {first.status_code} {first.json()['id']}")
    print(f"article, again: {again.status_code} replayed={again.headers.get('idempotent-replayed')} {again.json()['id']}")
    if again.json()["id"] != first.json()["id"]:
        print("a second payment: the key did not protect the order", file=sys.stderr)
        return 1

    paid = sdk_way(base, args.shop, args.secret, args.order)
    print(f"sdk: paid {paid.payment.id} {paid.payment.amount.value} {paid.payment.amount.currency}")
    if paid.payment.id != first.json()["id"]:
        print("the SDK's key differs from the article's", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
