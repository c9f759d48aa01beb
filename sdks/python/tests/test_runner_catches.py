"""The scenario runner fails a scenario whose expectation does not hold (so a
green run means something)."""
from __future__ import annotations

import copy

import pytest

from scenarios import SCENARIOS, ScenarioFailure, load, run_scenario


def mutated(name: str, change) -> dict:
    spec = copy.deepcopy(load(next(SCENARIOS.glob(f"*_{name}.json"))))
    change(spec)
    return spec


def no_losses(spec: dict) -> None:
    spec["faults"]["lose_answers"][0]["count"] = 0
    for member in ("attempts", "replayed"):
        spec["steps"][0]["expect"].pop(member)


@pytest.mark.parametrize(
    "name,change,member",
    [
        ("replay", lambda s: s["steps"][1]["expect"].update(replayed=False), "replayed"),
        ("replay", lambda s: s["ledger"]["succeeded_charges"].update(A=2), "ledger"),
        ("key_reused", lambda s: s["steps"][1]["expect"].update(attempts=2), "attempts"),
        ("lost_answers", lambda s: s["steps"][0]["expect"].update(attempts=1), "attempts"),
        ("declined", lambda s: s["steps"][0]["expect"].update(outcome="paid"), "outcome"),
        ("pay_order", lambda s: s["steps"][1]["expect"].update(found_before_paying=False), "found_before_paying"),
        # A capture's or void's refusal is its outcome, its code checked like a raised one's.
        ("authorize_capture", lambda s: s["steps"][3]["expect"].update(error_code="payment_not_capturable"), "error_code"),
        ("authorize_capture", lambda s: s["steps"][2]["expect"].update(replayed=False), "replayed"),
        ("authorize_capture", lambda s: s["steps"][12]["expect"].update(same_capture_as="c1"), "same_capture_as"),
        ("void", lambda s: s["steps"][1]["expect"].update(outcome="released"), "outcome"),
        # A proxy scenario in which nothing was retried proves nothing.
        ("lost_answers", no_losses, "no key was sent more than once"),
    ],
)
def test_a_wrong_expectation_fails(server, name: str, change, member: str) -> None:
    with pytest.raises(ScenarioFailure, match=member):
        run_scenario(mutated(name, change), server.url, "async", server.operator_url)
