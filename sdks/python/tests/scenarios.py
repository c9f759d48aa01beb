"""The runner of the shared scenarios (sdks/scenarios/*.json, format in its README)."""
from __future__ import annotations

import asyncio
import json
import threading
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional

import httpx

from chargeonce import (
    Amount, AsyncClient, Authorized, CancelCanceled, CancelCharged, CancelDeclined, CancelRefunded, CancelUncertain,
    Canceled, CaptureFailed, Captured, CaptureRefused, CaptureUncertain, ChargeonceError, Client, Declined,
    IdempotencyKey, KeyReused, Paid, ProblemError, RefundFailed, Refunded, RefundUncertain, RetryPolicy, Uncertain,
    VoidFailed, VoidRefused, VoidReleased, VoidUncertain, VoidVoided, payment_body,
)

from harness import SECRET, SHOP, FaultProxy, Recorded

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def scenario_files() -> List[Path]:
    return sorted(SCENARIOS.glob("*.json"))


class ScenarioFailure(AssertionError):
    pass


def policy_of(spec: Dict[str, Any]) -> RetryPolicy:
    c = spec.get("client", {})
    default = RetryPolicy()
    return RetryPolicy(
        budget=c.get("budget_ms", default.budget * 1000) / 1000,
        attempt_timeout=c.get("attempt_timeout_ms", default.attempt_timeout * 1000) / 1000,
        base_delay=c.get("base_delay_ms", default.base_delay * 1000) / 1000,
        max_delay=c.get("max_delay_ms", default.max_delay * 1000) / 1000,
        max_attempts=c.get("max_attempts", default.max_attempts),
        prefer_wait=c["prefer_wait_s"] if "prefer_wait_s" in c else default.prefer_wait,
    )


def subset(expected: Any, actual: Any) -> bool:
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(k in actual and subset(v, actual[k]) for k, v in expected.items())
    return expected == actual


def check_recorded(requests: List[Recorded]) -> Optional[str]:
    """What is wrong with the requests a fault proxy recorded, or None: every
    request with one ``Idempotency-Key`` must have the same method, path and body
    bytes as the first with that key, and some key must have been sent more than
    once (a proxy scenario that caused no retry proves nothing)."""
    by_key: Dict[str, List[Recorded]] = {}
    for request in requests:
        if request.key is not None:
            by_key.setdefault(request.key, []).append(request)
    for key, sent in by_key.items():
        first = sent[0]
        for n, other in enumerate(sent[1:], 2):
            for member in ("method", "path", "body"):
                if getattr(other, member) != getattr(first, member):
                    return (f"key {key}: request {n} of {len(sent)} has {member} "
                            f"{getattr(other, member)!r}, the first had {getattr(first, member)!r}")
    if not any(len(sent) > 1 for sent in by_key.values()):
        counts = {key: len(sent) for key, sent in by_key.items()}
        return f"no key was sent more than once (no retry through the proxy): {counts}"
    return None


class Run:
    def __init__(self, spec: Dict[str, Any], server_url: str, flavour: str, operator_url: str) -> None:
        self.spec = spec
        self.server_url = server_url
        self.operator_url = operator_url
        self.flavour = flavour
        self.run_id = f"{spec['name']}-{flavour}-{uuid.uuid4().hex[:8]}".replace("_", "-")
        self.results: Dict[str, Dict[str, Any]] = {}
        self.orders = set()
        self.lock = threading.Lock()

    def reference(self, order: str) -> str:
        self.orders.add(order)
        return f"{order}-{self.run_id}"

    def key(self, order: str, operation: str) -> IdempotencyKey:
        return IdempotencyKey.for_operation(self.reference(order), operation)

    # -- faults --------------------------------------------------------------

    def _rules(self) -> List[Dict[str, Any]]:
        rules = []
        for rule in self.spec.get("faults", {}).get("lose_answers", []):
            rule = dict(rule)
            if "order" in rule:
                rule["key"] = self.key(rule["order"], rule.get("operation", "pay")).value
            rule["left"] = rule.get("count")
            rules.append(rule)
        return rules

    def _lose(self, rules: List[Dict[str, Any]]):
        def lose(method: str, path: str, headers: Dict[str, str]) -> bool:
            with self.lock:
                for rule in rules:
                    if rule["method"] != method or rule["path"] != path:
                        continue
                    if "key" in rule and headers.get("idempotency-key") != rule["key"]:
                        continue
                    if rule["left"] is None:
                        return True
                    if rule["left"] > 0:
                        rule["left"] -= 1
                        return True
                    return False
            return False

        return lose

    # -- running -------------------------------------------------------------

    async def run(self) -> None:
        proxy = None
        base = self.server_url
        if self.spec.get("faults"):
            proxy = FaultProxy(self.server_url, self._lose(self._rules()))
            base = proxy.url
        policy = policy_of(self.spec)
        if self.flavour == "sync":
            self.client: Any = Client(base, SHOP, SECRET, policy)
        else:
            self.client = AsyncClient(base, SHOP, SECRET, policy)
        try:
            for index, step in enumerate(self.spec["steps"]):
                if step["do"] == "concurrently":
                    tasks = []
                    for n, call in enumerate(step["calls"]):
                        if n:
                            await asyncio.sleep(step.get("stagger_ms", 0) / 1000)
                        tasks.append(asyncio.ensure_future(self.step(call)))
                    done = await asyncio.gather(*tasks)
                    for n, (call, result) in enumerate(zip(step["calls"], done)):
                        self.check(f"{index}.{n}", call, result)
                else:
                    self.check(str(index), step, await self.step(step))
            await self.check_ledger()
            if proxy:
                problem = check_recorded(proxy.recorded())
                if problem:
                    self.fail("proxy", "recorded", problem)
        finally:
            if self.flavour == "sync":
                self.client.close()
            else:
                await self.client.aclose()
            if proxy:
                proxy.stop()

    async def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        fn = getattr(self.client, method)
        if self.flavour == "sync":
            return await asyncio.to_thread(fn, *args, **kwargs)
        return await fn(*args, **kwargs)

    async def collect(self, method: str, *args: Any, **kwargs: Any) -> List[Any]:
        fn = getattr(self.client, method)
        if self.flavour == "sync":
            return await asyncio.to_thread(lambda: list(fn(*args, **kwargs)))
        return [item async for item in fn(*args, **kwargs)]

    async def step(self, step: Dict[str, Any]) -> Dict[str, Any]:
        do = step["do"]
        r: Dict[str, Any] = {"do": do}
        amount = Amount.from_json(step["amount"]) if step.get("amount") else None
        try:
            if do in ("pay", "pay_order", "authorize"):
                ref = self.reference(step["order"])
                res = await self.call(do, self.key(step["order"], step.get("operation", "pay")), amount, ref, step["token"])
                r.update(outcome=res.outcome, attempts=res.attempts, found=res.found_before_paying)
                if res.payment is not None:
                    r["payment_id"] = res.payment.id
                    r["resource"] = res.payment.raw
            elif do == "capture":
                payment_id = self.results[step["payment_of"]]["payment_id"]
                key = self.key(step["order"], step["operation"])
                res = await self.call("capture", payment_id, key, amount, step.get("final"))
                r.update(outcome=res.outcome, attempts=res.attempts)
                if res.capture is not None:
                    r.update(capture_id=res.capture.id, payment_id=res.capture.payment_id, resource=res.capture.raw)
                elif isinstance(res.outcome, CaptureRefused):
                    r.update(refusal=res.outcome.problem, resource=res.outcome.problem.raw)
            elif do == "void":
                payment_id = self.results[step["payment_of"]]["payment_id"]
                res = await self.call("void", payment_id, self.key(step["order"], step["operation"]))
                r.update(outcome=res.outcome, attempts=res.attempts)
                if res.payment is not None:
                    r.update(payment_id=res.payment.id, resource=res.payment.raw)
                elif isinstance(res.outcome, VoidRefused):
                    r.update(refusal=res.outcome.problem, resource=res.outcome.problem.raw)
            elif do == "refund":
                payment_id = self.results[step["payment_of"]]["payment_id"]
                res = await self.call("refund", payment_id, self.key(step["order"], step["operation"]), amount)
                r.update(outcome=res.outcome, attempts=res.attempts)
                if isinstance(res.outcome, (Refunded, RefundFailed)):
                    r["refund_id"] = res.outcome.refund.id
                    r["resource"] = res.outcome.refund.raw
            elif do == "cancel":
                payment_id = self.results[step["payment_of"]]["payment_id"]
                res = await self.call("cancel", payment_id, self.key(step["order"], step["operation"]))
                r.update(outcome=res.outcome, attempts=res.attempts)
                if res.payment is not None:
                    r["payment_id"] = res.payment.id
                    r["resource"] = res.payment.raw
            elif do == "raw_pay":
                ref = self.reference(step["order"])
                key = self.key(step["order"], step.get("operation", "pay"))
                async with httpx.AsyncClient(auth=(SHOP, SECRET)) as http:
                    answer = await http.post(
                        f"{self.server_url}/v1/payments",
                        content=payment_body(amount, ref, step["token"]),  # type: ignore[arg-type]
                        headers={"idempotency-key": key.value, "content-type": "application/json"},
                    )
                body = answer.json()
                r.update(status=answer.status_code, replayed=answer.headers.get("idempotent-replayed") == "true",
                         error_code=body.get("code") if answer.status_code >= 400 else None)
                payment = body if answer.status_code < 400 else body.get("payment")
                if isinstance(payment, dict):
                    r["payment_id"] = payment.get("id")
                    r["resource"] = payment
            elif do == "get_key":
                info = await self.call("idempotency_key", self.key(step["order"], step.get("operation", "pay")))
                r.update(payment_id=info.payment_id, refund_id=info.refund_id, resource=info.raw)
            elif do == "list_payments":
                items = await self.collect("iter_payments", reference=self.reference(step["order"]), limit=step.get("limit"))
                r["count"] = len(items)
                if len(items) == 1:
                    r.update(payment_id=items[0].id, resource=items[0].raw)
            elif do == "list_refunds":
                payment_id = self.results[step["payment_of"]]["payment_id"]
                items = await self.collect("iter_payment_refunds", payment_id, limit=step.get("limit"))
                r["count"] = len(items)
                if len(items) == 1:
                    r.update(refund_id=items[0].id, resource=items[0].raw)
            elif do == "list_captures":
                payment_id = self.results[step["payment_of"]]["payment_id"]
                items = await self.collect("iter_payment_captures", payment_id, limit=step.get("limit"))
                r["count"] = len(items)
                if len(items) == 1:
                    r.update(capture_id=items[0].id, resource=items[0].raw)
            else:
                raise ScenarioFailure(f"unknown step kind {do!r}")
        except ChargeonceError as error:
            r["error"] = error
            r["attempts_n"] = error.attempts
        if "attempts" in r:
            r["attempts_n"] = len(r["attempts"])
        if "id" in step:
            self.results[step["id"]] = r
        return r

    def fail(self, where: str, member: str, message: str) -> None:
        raise ScenarioFailure(f"{self.spec['name']} ({self.flavour}) step {where}: {member}: {message}")

    def check(self, where: str, step: Dict[str, Any], r: Dict[str, Any]) -> None:
        e = step.get("expect", {})
        error = r.get("error")
        if step["do"] != "raw_pay":
            if "error_code" in e:
                # A capture's or void's refusal before executing is its outcome
                # (``refused``), the problem's code checked like a raised one.
                problem = error.problem if isinstance(error, ProblemError) else r.get("refusal")
                if problem is None:
                    self.fail(where, "error_code", f"expected {e['error_code']}, got {r.get('outcome', error)!r}")
                code = problem.code if isinstance(problem.code, str) else problem.code.value
                if code != e["error_code"]:
                    self.fail(where, "error_code", f"expected {e['error_code']}, got {code}")
                if code == "idempotency_key_reused" and not isinstance(error, KeyReused):
                    self.fail(where, "error_code", "not raised as KeyReused")
                if "status" in e and problem.status != e["status"]:
                    self.fail(where, "status", f"expected {e['status']}, got {problem.status}")
            elif error is not None:
                self.fail(where, "error", f"unexpected error {error!r}")
        else:
            for member in ("status", "error_code"):
                if member in e and r.get(member) != e[member]:
                    self.fail(where, member, f"expected {e[member]!r}, got {r.get(member)!r}")
        if "outcome" in e:
            names = {Paid: "paid", Declined: "declined", Canceled: "canceled", Authorized: "authorized",
                     Uncertain: "uncertain",
                     Refunded: "refunded", RefundFailed: "refund_failed", RefundUncertain: "uncertain",
                     CancelCanceled: "canceled", CancelRefunded: "refunded", CancelCharged: "charged",
                     CancelDeclined: "declined", CancelUncertain: "uncertain",
                     Captured: "captured", CaptureFailed: "capture_failed", CaptureRefused: "refused",
                     CaptureUncertain: "uncertain",
                     VoidVoided: "voided", VoidReleased: "released", VoidFailed: "void_failed", VoidRefused: "refused",
                     VoidUncertain: "uncertain"}
            got = names.get(type(r.get("outcome")))
            if got != e["outcome"]:
                self.fail(where, "outcome", f"expected {e['outcome']}, got {r.get('outcome')!r}")
        attempts = r.get("attempts") or []
        if "attempts" in e and r.get("attempts_n") != e["attempts"]:
            self.fail(where, "attempts", f"expected {e['attempts']}, got {r.get('attempts_n')}: {[a.describe() for a in attempts]}")
        if "min_attempts" in e and (r.get("attempts_n") or 0) < e["min_attempts"]:
            self.fail(where, "min_attempts", f"expected at least {e['min_attempts']}, got {r.get('attempts_n')}")
        if "first_status" in e and (not attempts or attempts[0].status != e["first_status"]):
            self.fail(where, "first_status", f"expected {e['first_status']}: {[a.describe() for a in attempts]}")
        if "replayed" in e:
            got = r["replayed"] if step["do"] == "raw_pay" else bool(attempts) and attempts[-1].replayed
            if got != e["replayed"]:
                self.fail(where, "replayed", f"expected {e['replayed']}: {[a.describe() for a in attempts]}")
        if "waited" in e and any(a.waited for a in attempts) != e["waited"]:
            self.fail(where, "waited", f"expected {e['waited']}: {[a.describe() for a in attempts]}")
        if "found_before_paying" in e and r.get("found") != e["found_before_paying"]:
            self.fail(where, "found_before_paying", f"expected {e['found_before_paying']}")
        if "payment_id" in e:
            outcome = r.get("outcome")
            pid = getattr(outcome, "payment_id", getattr(outcome, "refund_id", getattr(outcome, "capture_id", None)))
            if (e["payment_id"] is None) != (pid is None):
                self.fail(where, "payment_id", f"expected {e['payment_id']!r}, got {pid!r}")
        for member, field in (("same_payment_as", "payment_id"), ("same_refund_as", "refund_id"),
                              ("same_capture_as", "capture_id")):
            if member in e:
                other = self.results.get(e[member], {}).get(field)
                if other is None or r.get(field) != other:
                    self.fail(where, member, f"{r.get(field)!r} is not {other!r} of step {e[member]}")
        if "count" in e and r.get("count") != e["count"]:
            self.fail(where, "count", f"expected {e['count']}, got {r.get('count')}")
        if "fields" in e and not subset(e["fields"], r.get("resource")):
            self.fail(where, "fields", f"expected {e['fields']} within {r.get('resource')}")

    async def check_ledger(self) -> None:
        async with httpx.AsyncClient() as http:
            ledger = (await http.get(f"{self.operator_url}/sim/ledger")).json()
        counts: Dict[str, int] = {}
        for charge in ledger["charges"]:
            if charge["status"] == "succeeded":
                counts[charge["reference"]] = counts.get(charge["reference"], 0) + 1
        for order, expected in self.spec["ledger"].get("succeeded_charges", {}).items():
            got = counts.get(self.reference(order), 0)
            if got != expected:
                self.fail("ledger", order, f"expected {expected} succeeded charges, got {got}")
        for order in self.orders:
            if counts.get(self.reference(order), 0) > 1:
                self.fail("ledger", order, "charged more than once")


def run_scenario(spec: Dict[str, Any], server_url: str, flavour: str, operator_url: str) -> None:
    asyncio.run(Run(spec, server_url, flavour, operator_url).run())


def load(path: Path) -> Dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))
