"""The clients: ``Client`` (blocking) and ``AsyncClient`` (asyncio), on httpx.

Only I/O lives here: every judgement (the key, the retry decision, the
backoff, what an answer means) is in the pure modules, shared by both.
"""
from __future__ import annotations

import asyncio
import datetime
import json
import time
from typing import Any, AsyncIterator, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, TypeVar, Union
from urllib.parse import quote

import httpx

from ._errors import ConfigError, OrderAlreadyPaid, Unavailable, UnexpectedAnswer
from ._judge import (
    Answer,
    Done,
    Fail,
    KeyedCall,
    ReadCall,
    Sleep,
    HELD,
    answers_request,
    judge_cancel,
    judge_api_key,
    judge_capture,
    judge_payment,
    judge_refund,
    judge_void,
    judge_webhook_endpoint,
    uncertain_api_key,
    uncertain_cancel,
    uncertain_capture,
    uncertain_payment,
    uncertain_refund,
    uncertain_void,
    uncertain_webhook_endpoint,
)
from ._keys import IdempotencyKey, KeyLike, as_key
from ._models import (
    Amount,
    ApiKey,
    ApiKeyScope,
    Capture,
    CaptureMethod,
    IdempotencyKeyInfo,
    Page,
    Payment,
    PaymentHistory,
    Refund,
    WebhookEndpoint,
)
from ._outcome import (
    CONNECT,
    LOST,
    TIMEOUT,
    Authorized,
    CancelResult,
    Canceled,
    CaptureResult,
    Declined,
    Paid,
    PayResult,
    RefundResult,
    VoidResult,
)
from ._retry import RetryPolicy

__version__ = "0.1.0"
USER_AGENT = f"chargeonce-python/{__version__}"

T = TypeVar("T")


CaptureMethodLike = Union[CaptureMethod, str]
ApiKeyScopeLike = Union[ApiKeyScope, str]


def payment_body(
    amount: Amount,
    reference: str,
    token: str,
    metadata: Optional[Mapping[str, str]] = None,
    capture_method: Optional[CaptureMethodLike] = None,
) -> bytes:
    """The ``POST /v1/payments`` body, serialised once (every retry sends these bytes).
    ``metadata`` (at most 50 pairs, keys of 1 to 40 characters, values of at most
    500) is part of the request: the same key with other metadata is refused.
    ``capture_method`` (``"manual"``: authorize only) is sent only when given;
    it is part of the request too."""
    body: Dict[str, Any] = {"amount": amount.to_json(), "reference": reference, "payment_method": {"token": token}}
    if metadata is not None:
        body["metadata"] = dict(metadata)
    if capture_method is not None:
        body["capture_method"] = capture_method.value if isinstance(capture_method, CaptureMethod) else str(capture_method)
    return _dump(body)


def refund_body(amount: Optional[Amount]) -> bytes:
    return _dump({"amount": amount.to_json()} if amount is not None else {})


def capture_body(amount: Optional[Amount] = None, final: Optional[bool] = None) -> bytes:
    """The ``POST /v1/payments/{id}/captures`` body: ``{}`` captures all that is
    capturable as the final capture; an ``amount`` captures that much (more
    may follow unless ``final`` is true). Members only when given."""
    body: Dict[str, Any] = {}
    if amount is not None:
        body["amount"] = amount.to_json()
    if final is not None:
        body["final"] = bool(final)
    return _dump(body)


#: The ``POST /v1/payments/{id}/cancel`` body.
CANCEL_BODY = b"{}"
#: The ``POST /v1/payments/{id}/void`` body.
VOID_BODY = b"{}"


def api_key_body(
    scope: ApiKeyScopeLike,
    description: Optional[str] = None,
    expires_at: Optional[Union[str, datetime.datetime]] = None,
) -> bytes:
    """The ``POST /v1/api-keys`` body, serialised once: the scope, and the
    description and expiry (RFC 3339, or an aware ``datetime``) only when
    given."""
    body: Dict[str, Any] = {"scope": scope.value if isinstance(scope, ApiKeyScope) else str(scope)}
    if description is not None:
        body["description"] = description
    if expires_at is not None:
        if isinstance(expires_at, datetime.datetime):
            if expires_at.tzinfo is None:
                raise ConfigError("expires_at must be an aware datetime (with a time zone)")
            expires_at = expires_at.isoformat()
        body["expires_at"] = expires_at
    return _dump(body)


def roll_api_key_body(expire_old_in_seconds: Optional[int] = None) -> bytes:
    """The ``POST /v1/api-keys/{id}/roll`` body: ``{}`` (the old key works
    24 h more), or how many seconds it keeps working (0 to 604800)."""
    if expire_old_in_seconds is None:
        return _dump({})
    return _dump({"expire_old_in_seconds": int(expire_old_in_seconds)})


#: The ``POST /v1/api-keys/{id}/revoke`` body.
REVOKE_API_KEY_BODY = b"{}"


def webhook_endpoint_body(url: str, enabled_events: Sequence[str], description: Optional[str] = None) -> bytes:
    """The ``POST /v1/webhook-endpoints`` body, serialised once: the URL, the
    event types (``["*"]``: all), and the description only when given."""
    if isinstance(enabled_events, str):
        raise ConfigError("enabled_events is a list of event types (or [\"*\"]), not a string")
    body: Dict[str, Any] = {"url": url, "enabled_events": list(enabled_events)}
    if description is not None:
        body["description"] = description
    return _dump(body)


def update_webhook_endpoint_body(
    enabled_events: Optional[Sequence[str]] = None,
    enabled: Optional[bool] = None,
    description: Optional[str] = None,
) -> bytes:
    """The ``POST /v1/webhook-endpoints/{id}`` body: only the fields given
    (``description=""`` clears it)."""
    if isinstance(enabled_events, str):
        raise ConfigError("enabled_events is a list of event types (or [\"*\"]), not a string")
    body: Dict[str, Any] = {}
    if enabled_events is not None:
        body["enabled_events"] = list(enabled_events)
    if enabled is not None:
        body["enabled"] = bool(enabled)
    if description is not None:
        body["description"] = description
    return _dump(body)


def roll_webhook_endpoint_secret_body(expire_old_in_seconds: Optional[int] = None) -> bytes:
    """The ``POST /v1/webhook-endpoints/{id}/roll-secret`` body: ``{}`` (the old
    secret signs 24 h more), or how many seconds it keeps signing (0 to 604800)."""
    if expire_old_in_seconds is None:
        return _dump({})
    return _dump({"expire_old_in_seconds": int(expire_old_in_seconds)})


def _made_endpoint(made: Optional[WebhookEndpoint], call: KeyedCall[Optional[WebhookEndpoint]]) -> WebhookEndpoint:
    """The endpoint a make, update or roll answered, or :class:`Unavailable`
    when the budget ran out first (retry later with the same idempotency key)."""
    if made is None:
        last = call.attempts[-1].describe() if call.attempts else "no attempt"
        raise Unavailable(last, len(call.attempts))
    return made


def _made(made: Optional[ApiKey], call: KeyedCall[Optional[ApiKey]]) -> ApiKey:
    """The key a make, roll or revoke answered, or :class:`Unavailable` when
    the budget ran out first (retry later with the same idempotency key)."""
    if made is None:
        last = call.attempts[-1].describe() if call.attempts else "no attempt"
        raise Unavailable(last, len(call.attempts))
    return made


def _dump(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _paid_for(result: PayResult, amount: Amount, reference: str) -> PayResult:
    """``result``, unless its payment is not the one asked for (another order,
    amount or currency: a server older than ``order_already_paid``, or the
    order's payment found by ``pay_order``): then :class:`OrderAlreadyPaid`,
    never "paid"."""
    outcome = result.outcome
    payment = outcome.payment if isinstance(outcome, (Paid, Declined, Canceled, Authorized)) else None
    if payment is not None and not answers_request(payment, amount, reference):
        raise OrderAlreadyPaid.of(payment, len(result.attempts))
    return result


def _found(payments: List[Payment], key: IdempotencyKey) -> Optional[PayResult]:
    """The order's payment that ``pay_order`` finds (nothing sent): a succeeded
    one is paid; an authorization still holding money is authorized."""
    for payment in payments:
        if payment.status == "succeeded":
            return PayResult(Paid(payment), key, [], found_before_paying=True)
    for payment in payments:
        if payment.status in HELD:
            return PayResult(Authorized(payment), key, [], found_before_paying=True)
    return None


def _segment(value: str) -> str:
    return quote(value, safe="")


def failure_kind(error: httpx.RequestError) -> str:
    """Connect (nothing sent), timeout, or lost (sent; it may have executed):
    every other failure of a request (a broken stream, an undecodable
    answer) counts as lost, never as an error that hides a charge."""
    if isinstance(error, (httpx.ConnectError, httpx.ConnectTimeout)):
        return CONNECT
    if isinstance(error, httpx.TimeoutException):
        return TIMEOUT
    return LOST


def _answer(response: httpx.Response) -> Answer:
    return Answer(
        status=response.status_code,
        headers={k.lower(): v for k, v in response.headers.items()},
        body=response.content,
    )


def _list_params(**params: Optional[Union[str, int]]) -> Dict[str, str]:
    return {k: str(v) for k, v in params.items() if v is not None}


def _page(answer: Answer, parse: Callable[[Mapping[str, Any]], T]) -> Page[T]:
    data = answer.json()
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise UnexpectedAnswer(answer.status, answer.excerpt(), 1)
    return Page(
        object=str(data.get("object", "list")),
        data=[parse(item) for item in data["data"]],
        has_more=bool(data.get("has_more", False)),
    )


def _parsed(answer: Answer, parse: Callable[[Mapping[str, Any]], T]) -> T:
    data = answer.json()
    try:
        return parse(data)
    except (KeyError, TypeError, ValueError):
        raise UnexpectedAnswer(answer.status, answer.excerpt(), 1) from None


class _Base:
    def __init__(self, base_url: str, shop: str, secret: str, policy: Optional[RetryPolicy]) -> None:
        parsed = httpx.URL(base_url)
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise ConfigError(f"base URL `{base_url}` is not an http(s) URL")
        self.base_url = base_url.rstrip("/") + "/"
        self.shop = shop
        self._auth = httpx.BasicAuth(shop, secret)
        self.policy = policy or RetryPolicy()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.base_url!r}, shop={self.shop!r}, secret='***')"

    def _url(self, path: str) -> str:
        return self.base_url + path

    def _keyed_headers(self, key: IdempotencyKey, extra: Mapping[str, str]) -> Dict[str, str]:
        headers = {"idempotency-key": key.value, "content-type": "application/json"}
        headers.update(extra)
        return headers

    def _payments_query(
        self,
        reference: Optional[str],
        status: Optional[str],
        limit: Optional[int],
        starting_after: Optional[str],
        ending_before: Optional[str],
        created_gte: Optional[str],
        created_lt: Optional[str],
    ) -> Dict[str, str]:
        return _list_params(
            reference=reference,
            status=status,
            limit=limit,
            starting_after=starting_after,
            ending_before=ending_before,
            created_gte=created_gte,
            created_lt=created_lt,
        )


class Client(_Base):
    """A blocking client of one chargeonce service, as one shop.

    >>> client = Client("http://127.0.0.1:8080", "demo", "sk_...")      # doctest: +SKIP
    >>> key = IdempotencyKey.for_operation("order-123", "pay")          # doctest: +SKIP
    >>> client.pay(key, Amount.of("1500.00", "RUB"), "order-123", "tok_ok").outcome  # doctest: +SKIP
    Paid(payment=Payment(...))
    """

    def __init__(
        self,
        base_url: str,
        shop: str,
        secret: str,
        policy: Optional[RetryPolicy] = None,
        *,
        connect_timeout: float = 5.0,
        http: Optional[httpx.Client] = None,
    ) -> None:
        super().__init__(base_url, shop, secret, policy)
        # A caller's own httpx.Client (proxies, TLS settings) is fine: every
        # request carries the shop's Basic auth itself.
        self._http = http or httpx.Client(
            follow_redirects=False,
            headers={"user-agent": USER_AGENT},
            timeout=httpx.Timeout(20.0, connect=connect_timeout),
        )
        self._connect_timeout = connect_timeout

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- keyed POSTs -------------------------------------------------------

    def pay(
        self,
        key: KeyLike,
        amount: Amount,
        reference: str,
        token: str,
        *,
        deadline: Optional[float] = None,
        metadata: Optional[Mapping[str, str]] = None,
        capture_method: Optional[CaptureMethodLike] = None,
    ) -> PayResult:
        """``POST /v1/payments`` under ``key``, retried (same key, same body bytes)
        until a definite answer or the end of the budget: :class:`Paid`,
        :class:`Declined`, :class:`Canceled`, :class:`Authorized` (with
        ``capture_method="manual"``: held, nothing taken; see :meth:`authorize`),
        or :class:`Uncertain` when the budget ran out.
        ``deadline`` (seconds from now) ends the call sooner, as :class:`Uncertain`
        when no definite answer came by then: bound a payment with it, never
        with an outer cancellation, whose exception says nothing of the charge.
        Raises :class:`KeyReused` (never retried), :class:`OrderAlreadyPaid` and
        :class:`ProblemError`."""
        key = as_key(key)
        body = payment_body(amount, reference, token, metadata, capture_method)
        call = KeyedCall(self.policy, judge_payment, uncertain_payment, body, True)
        call.end_by(deadline)
        outcome = self._run(self._url("v1/payments"), key, call)
        return _paid_for(PayResult(outcome=outcome, key=key, attempts=call.attempts), amount, reference)

    def refund(self, payment_id: str, key: KeyLike, amount: Optional[Amount] = None) -> RefundResult:
        """``POST /v1/payments/{id}/refunds`` under the refund's own key
        (``for_operation(order, "refund-1")``); ``amount=None`` refunds the rest."""
        key = as_key(key)
        call = KeyedCall(self.policy, judge_refund, uncertain_refund, refund_body(amount), False)
        outcome = self._run(self._url(f"v1/payments/{_segment(payment_id)}/refunds"), key, call)
        return RefundResult(outcome=outcome, key=key, attempts=call.attempts)

    def cancel(self, payment_id: str, key: KeyLike, *, deadline: Optional[float] = None) -> CancelResult:
        """``POST /v1/payments/{id}/cancel`` under the cancel's own key
        (``for_operation(order, "cancel")``), retried with the same key while the
        answer is 202 (the charge is looked up only once the settle window has
        passed): :class:`CancelCanceled` (nothing taken), :class:`CancelRefunded`
        (the charge was found and refunded in full), :class:`CancelCharged`,
        :class:`CancelDeclined`, or :class:`CancelUncertain` when the budget (or
        ``deadline``) ran out first. A payment already final when the cancel came
        raises :class:`PaymentNotCancelable` (a :class:`ProblemError`, 409
        ``payment_not_cancelable``) with that ``payment``."""
        key = as_key(key)
        call = KeyedCall(self.policy, judge_cancel, uncertain_cancel, CANCEL_BODY, False)
        call.end_by(deadline)
        outcome = self._run(self._url(f"v1/payments/{_segment(payment_id)}/cancel"), key, call)
        return CancelResult(outcome=outcome, key=key, attempts=call.attempts)

    def authorize(
        self,
        key: KeyLike,
        amount: Amount,
        reference: str,
        token: str,
        *,
        deadline: Optional[float] = None,
        metadata: Optional[Mapping[str, str]] = None,
    ) -> PayResult:
        """:meth:`pay` with ``capture_method="manual"``: holds ``amount`` on the
        card, takes nothing: :class:`Authorized` (then :meth:`capture` and
        :meth:`void`), :class:`Declined` or :class:`Uncertain`. The key is the
        order's payment key (``for_operation(order, "pay")``)."""
        return self.pay(
            key, amount, reference, token, deadline=deadline, metadata=metadata, capture_method=CaptureMethod.MANUAL
        )

    def capture(
        self,
        payment_id: str,
        key: KeyLike,
        amount: Optional[Amount] = None,
        final: Optional[bool] = None,
        *,
        deadline: Optional[float] = None,
    ) -> CaptureResult:
        """``POST /v1/payments/{id}/captures`` under the capture's own key
        (``for_operation(order, "capture-1")``, ``"capture-2"`` for the next
        shipment), retried with the same key and body bytes while the answer is
        202 (pending at the acquirer), 409 (``request_in_progress``,
        ``authorization_busy``) or 503: :class:`Captured`, :class:`CaptureFailed`
        (the acquirer refused; stored), :class:`CaptureRefused` (nothing executed:
        ``capture_exceeds_capturable``, ``payment_not_capturable``, ...), or
        :class:`CaptureUncertain` when the budget (or ``deadline``) ran out
        first: never capture again under a new key then. ``amount=None``
        captures all that is capturable, as the final capture."""
        key = as_key(key)
        call = KeyedCall(self.policy, judge_capture, uncertain_capture, capture_body(amount, final), False)
        call.end_by(deadline)
        outcome = self._run(self._url(f"v1/payments/{_segment(payment_id)}/captures"), key, call)
        return CaptureResult(outcome=outcome, key=key, attempts=call.attempts)

    def void(self, payment_id: str, key: KeyLike, *, deadline: Optional[float] = None) -> VoidResult:
        """``POST /v1/payments/{id}/void`` under the void's own key
        (``for_operation(order, "void")``), retried with the same key while the
        answer is 202 (in flight), 409 or 503: :class:`VoidVoided` (nothing was
        captured: nothing taken), :class:`VoidReleased` (the captures kept, the
        rest released), :class:`VoidFailed` (the acquirer refused; stored),
        :class:`VoidRefused` (nothing executed: ``payment_not_voidable``, ...), or
        :class:`VoidUncertain` when the budget (or ``deadline``) ran out."""
        key = as_key(key)
        call = KeyedCall(self.policy, judge_void, uncertain_void, VOID_BODY, False)
        call.end_by(deadline)
        outcome = self._run(self._url(f"v1/payments/{_segment(payment_id)}/void"), key, call)
        return VoidResult(outcome=outcome, key=key, attempts=call.attempts)

    def pay_order(
        self,
        key: KeyLike,
        amount: Amount,
        reference: str,
        token: str,
        *,
        capture_method: Optional[CaptureMethodLike] = None,
    ) -> PayResult:
        """Looks the order up first (``GET /v1/payments?reference=``): an order that
        already has a succeeded payment gets it back with nothing sent
        (``found_before_paying``), and so does one with an authorization still
        holding money (:class:`Authorized`); otherwise :meth:`pay`."""
        key = as_key(key)
        found = _found(self.payments_for(reference), key)
        if found is not None:
            return _paid_for(found, amount, reference)
        return self.pay(key, amount, reference, token, capture_method=capture_method)

    def _run(self, url: str, key: IdempotencyKey, call: KeyedCall[T]) -> T:
        while True:
            timeout, extra = call.plan()
            started = time.monotonic()
            try:
                response = self._http.post(
                    url,
                    content=call.body,
                    auth=self._auth,
                    headers=self._keyed_headers(key, extra),
                    timeout=httpx.Timeout(timeout, connect=min(self._connect_timeout, timeout)),
                )
                decision = call.on_answer(_answer(response), time.monotonic() - started)
            except httpx.RequestError as error:
                decision = call.on_failure(failure_kind(error), str(error) or type(error).__name__, time.monotonic() - started)
            if isinstance(decision, Sleep):
                time.sleep(decision.seconds)
                continue
            if isinstance(decision, Done):
                return decision.value  # type: ignore[no-any-return]
            raise decision.error

    # -- reads -------------------------------------------------------------

    def _get(self, path: str, params: Optional[Mapping[str, str]] = None) -> Answer:
        return self._safe("GET", path, params)

    def _safe(self, method: str, path: str, params: Optional[Mapping[str, str]] = None) -> Answer:
        """A request without a body that is safe to repeat (a GET, or a DELETE
        whose repeat changes nothing), retried like every read."""
        call = ReadCall(self.policy)
        while True:
            try:
                response = self._http.request(method, self._url(path), params=params, auth=self._auth, timeout=call.timeout())
                decision = call.on_answer(_answer(response))
            except httpx.RequestError as error:
                decision = call.on_failure(failure_kind(error), str(error) or type(error).__name__)
            if isinstance(decision, Sleep):
                time.sleep(decision.seconds)
                continue
            if isinstance(decision, Done):
                return decision.value  # type: ignore[no-any-return]
            assert isinstance(decision, Fail)
            raise decision.error

    def payment(self, payment_id: str) -> Payment:
        return _parsed(self._get(f"v1/payments/{_segment(payment_id)}"), Payment.from_json)

    def payment_history(self, payment_id: str) -> PaymentHistory:
        """``GET /v1/payments/{id}/history``: everything that happened to one of the
        shop's payments (and its refunds), oldest first, and the repeat counts of its
        keys. A payment of another shop, or none, is a :class:`ProblemError` ``not_found``."""
        return _parsed(self._get(f"v1/payments/{_segment(payment_id)}/history"), PaymentHistory.from_json)

    def refund_by_id(self, refund_id: str) -> Refund:
        return _parsed(self._get(f"v1/refunds/{_segment(refund_id)}"), Refund.from_json)

    def capture_by_id(self, capture_id: str) -> Capture:
        """``GET /v1/captures/{id}``."""
        return _parsed(self._get(f"v1/captures/{_segment(capture_id)}"), Capture.from_json)

    def payment_captures(
        self,
        payment_id: str,
        *,
        limit: Optional[int] = None,
        starting_after: Optional[str] = None,
        ending_before: Optional[str] = None,
    ) -> Page[Capture]:
        """One page of ``GET /v1/payments/{id}/captures``, newest first."""
        params = _list_params(limit=limit, starting_after=starting_after, ending_before=ending_before)
        return _page(self._get(f"v1/payments/{_segment(payment_id)}/captures", params), Capture.from_json)

    def iter_payment_captures(self, payment_id: str, *, limit: Optional[int] = None) -> Iterator[Capture]:
        """Every capture of a payment, newest first, over all pages."""
        after: Optional[str] = None
        while True:
            page = self.payment_captures(payment_id, limit=limit, starting_after=after)
            yield from page.data
            if not page.has_more or page.last_id is None:
                return
            after = page.last_id

    def payments_for(self, reference: str) -> List[Payment]:
        """Every payment of one order (oldest first)."""
        return list(reversed(list(self.iter_payments(reference=reference, limit=100))))

    def list_payments(
        self,
        *,
        reference: Optional[str] = None,
        status: Optional[str] = None,
        limit: Optional[int] = None,
        starting_after: Optional[str] = None,
        ending_before: Optional[str] = None,
        created_gte: Optional[str] = None,
        created_lt: Optional[str] = None,
    ) -> Page[Payment]:
        """One page of ``GET /v1/payments``, newest first."""
        params = self._payments_query(reference, status, limit, starting_after, ending_before, created_gte, created_lt)
        return _page(self._get("v1/payments", params), Payment.from_json)

    def iter_payment_pages(self, **params: Any) -> Iterator[Page[Payment]]:
        """Every page, in the direction ``params`` walk, while ``has_more``."""
        while True:
            page = self.list_payments(**params)
            yield page
            following = page.next_params(params)
            if following is None:
                return
            params = following

    def iter_payments(self, **params: Any) -> Iterator[Payment]:
        for page in self.iter_payment_pages(**params):
            yield from page.data

    def list_refunds(
        self, *, limit: Optional[int] = None, starting_after: Optional[str] = None, ending_before: Optional[str] = None
    ) -> Page[Refund]:
        params = _list_params(limit=limit, starting_after=starting_after, ending_before=ending_before)
        return _page(self._get("v1/refunds", params), Refund.from_json)

    def payment_refunds(
        self,
        payment_id: str,
        *,
        limit: Optional[int] = None,
        starting_after: Optional[str] = None,
        ending_before: Optional[str] = None,
    ) -> Page[Refund]:
        params = _list_params(limit=limit, starting_after=starting_after, ending_before=ending_before)
        return _page(self._get(f"v1/payments/{_segment(payment_id)}/refunds", params), Refund.from_json)

    def iter_payment_refunds(self, payment_id: str, *, limit: Optional[int] = None) -> Iterator[Refund]:
        after: Optional[str] = None
        while True:
            page = self.payment_refunds(payment_id, limit=limit, starting_after=after)
            yield from page.data
            if not page.has_more or page.last_id is None:
                return
            after = page.last_id

    def iter_refunds(self, *, limit: Optional[int] = None) -> Iterator[Refund]:
        after: Optional[str] = None
        while True:
            page = self.list_refunds(limit=limit, starting_after=after)
            yield from page.data
            if not page.has_more or page.last_id is None:
                return
            after = page.last_id

    def idempotency_key(self, key: KeyLike) -> IdempotencyKeyInfo:
        """``GET /v1/idempotency-keys/{key}``: what the service knows of one key."""
        return _parsed(self._get(f"v1/idempotency-keys/{_segment(as_key(key).value)}"), IdempotencyKeyInfo.from_json)

    # -- API keys ------------------------------------------------------------

    def create_api_key(
        self,
        scope: ApiKeyScopeLike,
        key: KeyLike,
        *,
        description: Optional[str] = None,
        expires_at: Optional[Union[str, datetime.datetime]] = None,
    ) -> ApiKey:
        """``POST /v1/api-keys`` under ``key`` (with a ``full`` key): makes a live
        key with ``scope``, retried like :meth:`pay` (same key, same body bytes)
        on transport failures, 429 and 5xx. The answer's ``secret`` is shown
        once: store it now. A repeat under the same ``key`` makes nothing and
        answers the same key with ``secret=None`` and ``replayed=True`` (so if
        an answer was lost and a retry got the replay, revoke that key and
        make another under a new idempotency key). Raises :class:`ProblemError`
        (``insufficient_scope``, ``api_key_limit_reached``, ``invalid_request``),
        :class:`KeyReused`, and :class:`Unavailable` when the budget ran out."""
        return self._api_key_post("v1/api-keys", key, api_key_body(scope, description, expires_at))

    def list_api_keys(self) -> List[ApiKey]:
        """``GET /v1/api-keys``: every key of the shop, newest first, revoked and
        expired ones too (never their secrets)."""
        return _page(self._get("v1/api-keys"), ApiKey.from_json).data

    def api_key(self, api_key_id: str) -> ApiKey:
        """``GET /v1/api-keys/{id}``: one key of the shop (never its secret)."""
        return _parsed(self._get(f"v1/api-keys/{_segment(api_key_id)}"), ApiKey.from_json)

    def roll_api_key(self, api_key_id: str, key: KeyLike, *, expire_old_in_seconds: Optional[int] = None) -> ApiKey:
        """``POST /v1/api-keys/{id}/roll`` under ``key``: the successor (same scope
        and description; its ``secret`` shown once), the old key expiring after
        ``expire_old_in_seconds`` (0: at once; ``None``: 24 h; at most 7 days).
        Retried and replayed like :meth:`create_api_key`; 409
        ``api_key_inactive`` (revoked or expired) is a :class:`ProblemError`."""
        path = f"v1/api-keys/{_segment(api_key_id)}/roll"
        return self._api_key_post(path, key, roll_api_key_body(expire_old_in_seconds))

    def revoke_api_key(self, api_key_id: str, key: KeyLike) -> ApiKey:
        """``POST /v1/api-keys/{id}/revoke`` under ``key``: the key stops working at
        once. Revoking a revoked key changes nothing, so retries are safe (the
        key is required, not stored)."""
        return self._api_key_post(f"v1/api-keys/{_segment(api_key_id)}/revoke", key, REVOKE_API_KEY_BODY)

    def _api_key_post(self, path: str, key: KeyLike, body: bytes) -> ApiKey:
        call: KeyedCall[Optional[ApiKey]] = KeyedCall(self.policy, judge_api_key, uncertain_api_key, body, False)
        return _made(self._run(self._url(path), as_key(key), call), call)

    # -- Webhook endpoints ---------------------------------------------------

    def create_webhook_endpoint(
        self,
        url: str,
        enabled_events: Sequence[str],
        key: KeyLike,
        *,
        description: Optional[str] = None,
    ) -> WebhookEndpoint:
        """``POST /v1/webhook-endpoints`` under ``key`` (with a ``full`` key):
        registers ``url`` for the event types ``enabled_events`` (``["*"]``: every
        type, those added later too), retried like :meth:`pay` (same key, same
        body bytes) on transport failures, 429 and 5xx. The answer's ``secret``
        (the signing secret) is shown once: store it now. A repeat under the same
        ``key`` makes nothing and answers the same endpoint with ``secret=None``
        and ``replayed=True`` (if the secret was lost that way, roll it). Raises
        :class:`ProblemError` (``insufficient_scope``,
        ``webhook_endpoint_limit_reached`` at 16, ``invalid_request`` for a URL
        the service will not deliver to or an unknown event type),
        :class:`KeyReused`, and :class:`Unavailable` when the budget ran out."""
        body = webhook_endpoint_body(url, enabled_events, description)
        return self._endpoint_post("v1/webhook-endpoints", key, body)

    def list_webhook_endpoints(self) -> List[WebhookEndpoint]:
        """``GET /v1/webhook-endpoints``: every endpoint of the shop, oldest first
        (never their secrets)."""
        return _page(self._get("v1/webhook-endpoints"), WebhookEndpoint.from_json).data

    def webhook_endpoint(self, endpoint_id: str) -> WebhookEndpoint:
        """``GET /v1/webhook-endpoints/{id}``: one endpoint (never its secret); a
        :class:`ProblemError` ``not_found`` when there is none."""
        return _parsed(self._get(f"v1/webhook-endpoints/{_segment(endpoint_id)}"), WebhookEndpoint.from_json)

    def update_webhook_endpoint(
        self,
        endpoint_id: str,
        key: KeyLike,
        *,
        enabled_events: Optional[Sequence[str]] = None,
        enabled: Optional[bool] = None,
        description: Optional[str] = None,
    ) -> WebhookEndpoint:
        """``POST /v1/webhook-endpoints/{id}`` under ``key``: sets the fields given
        (``enabled=False`` pauses deliveries, open ones wait; ``description=""``
        clears it). Setting values is idempotent, so retries are safe (the key is
        required, not stored)."""
        body = update_webhook_endpoint_body(enabled_events, enabled, description)
        return self._endpoint_post(f"v1/webhook-endpoints/{_segment(endpoint_id)}", key, body)

    def delete_webhook_endpoint(self, endpoint_id: str) -> WebhookEndpoint:
        """``DELETE /v1/webhook-endpoints/{id}``: no delivery to it any more (its
        open deliveries are given up); answers the endpoint as it was deleted.
        Retried like a read; a second delete is a :class:`ProblemError`
        ``not_found`` (so is one whose first attempt's answer was lost)."""
        return _parsed(self._safe("DELETE", f"v1/webhook-endpoints/{_segment(endpoint_id)}"), WebhookEndpoint.from_json)

    def roll_webhook_endpoint_secret(
        self, endpoint_id: str, key: KeyLike, *, expire_old_in_seconds: Optional[int] = None
    ) -> WebhookEndpoint:
        """``POST /v1/webhook-endpoints/{id}/roll-secret`` under ``key``: a new
        ``secret`` (shown once) signs from now on; the old one keeps signing
        beside it for ``expire_old_in_seconds`` (0: stops at once; ``None``: 24 h;
        at most 7 days), so each delivery meanwhile carries two ``v1=``
        signatures and :func:`chargeonce.webhooks.verify` accepts either secret.
        Retried and replayed like :meth:`create_webhook_endpoint`."""
        path = f"v1/webhook-endpoints/{_segment(endpoint_id)}/roll-secret"
        return self._endpoint_post(path, key, roll_webhook_endpoint_secret_body(expire_old_in_seconds))

    def _endpoint_post(self, path: str, key: KeyLike, body: bytes) -> WebhookEndpoint:
        call: KeyedCall[Optional[WebhookEndpoint]] = KeyedCall(
            self.policy, judge_webhook_endpoint, uncertain_webhook_endpoint, body, False
        )
        return _made_endpoint(self._run(self._url(path), as_key(key), call), call)

    def acquirer_ledger(self, operator_url: str) -> Any:
        """``GET /sim/ledger`` on the service's operator listener (``operator_url``,
        e.g. ``http://127.0.0.1:8081``; never on the public one): the embedded
        simulator's ledger (a test tool), as JSON. No credentials are sent."""
        response = self._http.get(operator_url.rstrip("/") + "/sim/ledger", timeout=self.policy.attempt_timeout)
        response.raise_for_status()
        return response.json()


class AsyncClient(_Base):
    """The asyncio twin of :class:`Client`: the same methods, awaited."""

    def __init__(
        self,
        base_url: str,
        shop: str,
        secret: str,
        policy: Optional[RetryPolicy] = None,
        *,
        connect_timeout: float = 5.0,
        http: Optional[httpx.AsyncClient] = None,
    ) -> None:
        super().__init__(base_url, shop, secret, policy)
        self._http = http or httpx.AsyncClient(
            follow_redirects=False,
            headers={"user-agent": USER_AGENT},
            timeout=httpx.Timeout(20.0, connect=connect_timeout),
        )
        self._connect_timeout = connect_timeout

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def pay(
        self,
        key: KeyLike,
        amount: Amount,
        reference: str,
        token: str,
        *,
        deadline: Optional[float] = None,
        metadata: Optional[Mapping[str, str]] = None,
        capture_method: Optional[CaptureMethodLike] = None,
    ) -> PayResult:
        """As :meth:`Client.pay`. Bound it with ``deadline``, not ``asyncio.wait_for``:
        a cancellation raises ``CancelledError`` (or ``TimeoutError``) while an
        attempt may have been sent, which says nothing of the charge; the
        deadline ends the call as :class:`Uncertain`."""
        key = as_key(key)
        body = payment_body(amount, reference, token, metadata, capture_method)
        call = KeyedCall(self.policy, judge_payment, uncertain_payment, body, True)
        call.end_by(deadline)
        outcome = await self._run(self._url("v1/payments"), key, call)
        return _paid_for(PayResult(outcome=outcome, key=key, attempts=call.attempts), amount, reference)

    async def refund(self, payment_id: str, key: KeyLike, amount: Optional[Amount] = None) -> RefundResult:
        key = as_key(key)
        call = KeyedCall(self.policy, judge_refund, uncertain_refund, refund_body(amount), False)
        outcome = await self._run(self._url(f"v1/payments/{_segment(payment_id)}/refunds"), key, call)
        return RefundResult(outcome=outcome, key=key, attempts=call.attempts)

    async def cancel(self, payment_id: str, key: KeyLike, *, deadline: Optional[float] = None) -> CancelResult:
        """As :meth:`Client.cancel`."""
        key = as_key(key)
        call = KeyedCall(self.policy, judge_cancel, uncertain_cancel, CANCEL_BODY, False)
        call.end_by(deadline)
        outcome = await self._run(self._url(f"v1/payments/{_segment(payment_id)}/cancel"), key, call)
        return CancelResult(outcome=outcome, key=key, attempts=call.attempts)

    async def authorize(
        self,
        key: KeyLike,
        amount: Amount,
        reference: str,
        token: str,
        *,
        deadline: Optional[float] = None,
        metadata: Optional[Mapping[str, str]] = None,
    ) -> PayResult:
        """As :meth:`Client.authorize`."""
        return await self.pay(
            key, amount, reference, token, deadline=deadline, metadata=metadata, capture_method=CaptureMethod.MANUAL
        )

    async def capture(
        self,
        payment_id: str,
        key: KeyLike,
        amount: Optional[Amount] = None,
        final: Optional[bool] = None,
        *,
        deadline: Optional[float] = None,
    ) -> CaptureResult:
        """As :meth:`Client.capture`."""
        key = as_key(key)
        call = KeyedCall(self.policy, judge_capture, uncertain_capture, capture_body(amount, final), False)
        call.end_by(deadline)
        outcome = await self._run(self._url(f"v1/payments/{_segment(payment_id)}/captures"), key, call)
        return CaptureResult(outcome=outcome, key=key, attempts=call.attempts)

    async def void(self, payment_id: str, key: KeyLike, *, deadline: Optional[float] = None) -> VoidResult:
        """As :meth:`Client.void`."""
        key = as_key(key)
        call = KeyedCall(self.policy, judge_void, uncertain_void, VOID_BODY, False)
        call.end_by(deadline)
        outcome = await self._run(self._url(f"v1/payments/{_segment(payment_id)}/void"), key, call)
        return VoidResult(outcome=outcome, key=key, attempts=call.attempts)

    async def pay_order(
        self,
        key: KeyLike,
        amount: Amount,
        reference: str,
        token: str,
        *,
        capture_method: Optional[CaptureMethodLike] = None,
    ) -> PayResult:
        key = as_key(key)
        found = _found(await self.payments_for(reference), key)
        if found is not None:
            return _paid_for(found, amount, reference)
        return await self.pay(key, amount, reference, token, capture_method=capture_method)

    async def _run(self, url: str, key: IdempotencyKey, call: KeyedCall[T]) -> T:
        while True:
            timeout, extra = call.plan()
            started = time.monotonic()
            try:
                response = await self._http.post(
                    url,
                    content=call.body,
                    auth=self._auth,
                    headers=self._keyed_headers(key, extra),
                    timeout=httpx.Timeout(timeout, connect=min(self._connect_timeout, timeout)),
                )
                decision = call.on_answer(_answer(response), time.monotonic() - started)
            except httpx.RequestError as error:
                decision = call.on_failure(failure_kind(error), str(error) or type(error).__name__, time.monotonic() - started)
            if isinstance(decision, Sleep):
                await asyncio.sleep(decision.seconds)
                continue
            if isinstance(decision, Done):
                return decision.value  # type: ignore[no-any-return]
            raise decision.error

    async def _get(self, path: str, params: Optional[Mapping[str, str]] = None) -> Answer:
        return await self._safe("GET", path, params)

    async def _safe(self, method: str, path: str, params: Optional[Mapping[str, str]] = None) -> Answer:
        call = ReadCall(self.policy)
        while True:
            try:
                response = await self._http.request(
                    method, self._url(path), params=params, auth=self._auth, timeout=call.timeout()
                )
                decision = call.on_answer(_answer(response))
            except httpx.RequestError as error:
                decision = call.on_failure(failure_kind(error), str(error) or type(error).__name__)
            if isinstance(decision, Sleep):
                await asyncio.sleep(decision.seconds)
                continue
            if isinstance(decision, Done):
                return decision.value  # type: ignore[no-any-return]
            assert isinstance(decision, Fail)
            raise decision.error

    async def payment(self, payment_id: str) -> Payment:
        return _parsed(await self._get(f"v1/payments/{_segment(payment_id)}"), Payment.from_json)

    async def payment_history(self, payment_id: str) -> PaymentHistory:
        return _parsed(await self._get(f"v1/payments/{_segment(payment_id)}/history"), PaymentHistory.from_json)

    async def refund_by_id(self, refund_id: str) -> Refund:
        return _parsed(await self._get(f"v1/refunds/{_segment(refund_id)}"), Refund.from_json)

    async def capture_by_id(self, capture_id: str) -> Capture:
        return _parsed(await self._get(f"v1/captures/{_segment(capture_id)}"), Capture.from_json)

    async def payment_captures(
        self,
        payment_id: str,
        *,
        limit: Optional[int] = None,
        starting_after: Optional[str] = None,
        ending_before: Optional[str] = None,
    ) -> Page[Capture]:
        params = _list_params(limit=limit, starting_after=starting_after, ending_before=ending_before)
        return _page(await self._get(f"v1/payments/{_segment(payment_id)}/captures", params), Capture.from_json)

    async def iter_payment_captures(self, payment_id: str, *, limit: Optional[int] = None) -> AsyncIterator[Capture]:
        after: Optional[str] = None
        while True:
            page = await self.payment_captures(payment_id, limit=limit, starting_after=after)
            for capture in page.data:
                yield capture
            if not page.has_more or page.last_id is None:
                return
            after = page.last_id

    async def payments_for(self, reference: str) -> List[Payment]:
        found = [p async for p in self.iter_payments(reference=reference, limit=100)]
        return list(reversed(found))

    async def list_payments(
        self,
        *,
        reference: Optional[str] = None,
        status: Optional[str] = None,
        limit: Optional[int] = None,
        starting_after: Optional[str] = None,
        ending_before: Optional[str] = None,
        created_gte: Optional[str] = None,
        created_lt: Optional[str] = None,
    ) -> Page[Payment]:
        params = self._payments_query(reference, status, limit, starting_after, ending_before, created_gte, created_lt)
        return _page(await self._get("v1/payments", params), Payment.from_json)

    async def iter_payment_pages(self, **params: Any) -> AsyncIterator[Page[Payment]]:
        while True:
            page = await self.list_payments(**params)
            yield page
            following = page.next_params(params)
            if following is None:
                return
            params = following

    async def iter_payments(self, **params: Any) -> AsyncIterator[Payment]:
        async for page in self.iter_payment_pages(**params):
            for payment in page.data:
                yield payment

    async def list_refunds(
        self, *, limit: Optional[int] = None, starting_after: Optional[str] = None, ending_before: Optional[str] = None
    ) -> Page[Refund]:
        params = _list_params(limit=limit, starting_after=starting_after, ending_before=ending_before)
        return _page(await self._get("v1/refunds", params), Refund.from_json)

    async def payment_refunds(
        self,
        payment_id: str,
        *,
        limit: Optional[int] = None,
        starting_after: Optional[str] = None,
        ending_before: Optional[str] = None,
    ) -> Page[Refund]:
        params = _list_params(limit=limit, starting_after=starting_after, ending_before=ending_before)
        return _page(await self._get(f"v1/payments/{_segment(payment_id)}/refunds", params), Refund.from_json)

    async def iter_payment_refunds(self, payment_id: str, *, limit: Optional[int] = None) -> AsyncIterator[Refund]:
        after: Optional[str] = None
        while True:
            page = await self.payment_refunds(payment_id, limit=limit, starting_after=after)
            for refund in page.data:
                yield refund
            if not page.has_more or page.last_id is None:
                return
            after = page.last_id

    async def idempotency_key(self, key: KeyLike) -> IdempotencyKeyInfo:
        return _parsed(
            await self._get(f"v1/idempotency-keys/{_segment(as_key(key).value)}"), IdempotencyKeyInfo.from_json
        )

    # -- API keys ------------------------------------------------------------

    async def create_api_key(
        self,
        scope: ApiKeyScopeLike,
        key: KeyLike,
        *,
        description: Optional[str] = None,
        expires_at: Optional[Union[str, datetime.datetime]] = None,
    ) -> ApiKey:
        return await self._api_key_post("v1/api-keys", key, api_key_body(scope, description, expires_at))

    async def list_api_keys(self) -> List[ApiKey]:
        return _page(await self._get("v1/api-keys"), ApiKey.from_json).data

    async def api_key(self, api_key_id: str) -> ApiKey:
        return _parsed(await self._get(f"v1/api-keys/{_segment(api_key_id)}"), ApiKey.from_json)

    async def roll_api_key(
        self, api_key_id: str, key: KeyLike, *, expire_old_in_seconds: Optional[int] = None
    ) -> ApiKey:
        path = f"v1/api-keys/{_segment(api_key_id)}/roll"
        return await self._api_key_post(path, key, roll_api_key_body(expire_old_in_seconds))

    async def revoke_api_key(self, api_key_id: str, key: KeyLike) -> ApiKey:
        return await self._api_key_post(f"v1/api-keys/{_segment(api_key_id)}/revoke", key, REVOKE_API_KEY_BODY)

    async def _api_key_post(self, path: str, key: KeyLike, body: bytes) -> ApiKey:
        call: KeyedCall[Optional[ApiKey]] = KeyedCall(self.policy, judge_api_key, uncertain_api_key, body, False)
        return _made(await self._run(self._url(path), as_key(key), call), call)

    # -- Webhook endpoints ---------------------------------------------------

    async def create_webhook_endpoint(
        self,
        url: str,
        enabled_events: Sequence[str],
        key: KeyLike,
        *,
        description: Optional[str] = None,
    ) -> WebhookEndpoint:
        body = webhook_endpoint_body(url, enabled_events, description)
        return await self._endpoint_post("v1/webhook-endpoints", key, body)

    async def list_webhook_endpoints(self) -> List[WebhookEndpoint]:
        return _page(await self._get("v1/webhook-endpoints"), WebhookEndpoint.from_json).data

    async def webhook_endpoint(self, endpoint_id: str) -> WebhookEndpoint:
        return _parsed(await self._get(f"v1/webhook-endpoints/{_segment(endpoint_id)}"), WebhookEndpoint.from_json)

    async def update_webhook_endpoint(
        self,
        endpoint_id: str,
        key: KeyLike,
        *,
        enabled_events: Optional[Sequence[str]] = None,
        enabled: Optional[bool] = None,
        description: Optional[str] = None,
    ) -> WebhookEndpoint:
        body = update_webhook_endpoint_body(enabled_events, enabled, description)
        return await self._endpoint_post(f"v1/webhook-endpoints/{_segment(endpoint_id)}", key, body)

    async def delete_webhook_endpoint(self, endpoint_id: str) -> WebhookEndpoint:
        answer = await self._safe("DELETE", f"v1/webhook-endpoints/{_segment(endpoint_id)}")
        return _parsed(answer, WebhookEndpoint.from_json)

    async def roll_webhook_endpoint_secret(
        self, endpoint_id: str, key: KeyLike, *, expire_old_in_seconds: Optional[int] = None
    ) -> WebhookEndpoint:
        path = f"v1/webhook-endpoints/{_segment(endpoint_id)}/roll-secret"
        return await self._endpoint_post(path, key, roll_webhook_endpoint_secret_body(expire_old_in_seconds))

    async def _endpoint_post(self, path: str, key: KeyLike, body: bytes) -> WebhookEndpoint:
        call: KeyedCall[Optional[WebhookEndpoint]] = KeyedCall(
            self.policy, judge_webhook_endpoint, uncertain_webhook_endpoint, body, False
        )
        return _made_endpoint(await self._run(self._url(path), as_key(key), call), call)

    async def acquirer_ledger(self, operator_url: str) -> Any:
        response = await self._http.get(operator_url.rstrip("/") + "/sim/ledger", timeout=self.policy.attempt_timeout)
        response.raise_for_status()
        return response.json()
