"""The models' fields against docs/openapi.json's component schemas.

docs/openapi.json is read from the repository root; the test is skipped when
it is absent (set CHARGEONCE_OPENAPI to read another file).
"""
from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any, Dict, Optional

import pytest

from chargeonce import (
    HISTORY_ENTRY_TYPES,
    Amount,
    ApiKey,
    ApiKeyScope,
    ApiKeyState,
    WebhookEndpoint,
    Capture,
    CaptureMethod,
    CaptureStatus,
    HistoryAcquirerCall,
    HistoryCallOutcome,
    HistorySettledBy,
    HistoryKey,
    HistoryTally,
    IdempotencyKeyInfo,
    Page,
    Payment,
    PaymentHistory,
    PaymentStatus,
    Problem,
    Refund,
    UnknownHistoryEntry,
    webhooks,
)

SPEC = Path(os.environ.get("CHARGEONCE_OPENAPI", Path(__file__).resolve().parents[3] / "docs" / "openapi.json"))

#: model -> the schema names it may be published under (the first that exists is used).
MODELS = {
    Payment: ["Payment"],
    Refund: ["Refund"],
    Capture: ["Capture"],
    Amount: ["Amount"],
    Problem: ["Problem"],
    IdempotencyKeyInfo: ["IdempotencyKey", "IdempotencyKeyInfo"],
    Page: ["List_Payment", "List", "PaymentList"],
    PaymentHistory: ["PaymentHistory"],
    HistoryKey: ["HistoryKey"],
    HistoryTally: ["HistoryTally"],
    ApiKey: ["ApiKey"],
    WebhookEndpoint: ["WebhookEndpoint"],
}


def wire_fields(model: type) -> set:
    return {f.name for f in dataclasses.fields(model) if f.metadata.get("wire", True)}


def resolve(spec: Dict[str, Any], schema: Dict[str, Any]) -> Dict[str, Any]:
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return resolve(spec, spec["components"]["schemas"][name])
    props: Dict[str, Any] = dict(schema.get("properties", {}))
    for part in schema.get("allOf", []):
        props.update(resolve(spec, part).get("properties", {}))
    return {**schema, "properties": props}


@pytest.fixture(scope="module")
def spec() -> Dict[str, Any]:
    if not SPEC.exists():
        pytest.skip(f"{SPEC} is absent (copy the OpenAPI branch's docs/openapi.json there)")
    return json.loads(SPEC.read_text(encoding="utf-8"))


def schema_of(spec: Dict[str, Any], names: list) -> Optional[Dict[str, Any]]:
    schemas = spec.get("components", {}).get("schemas", {})
    for name in names:
        if name in schemas:
            return resolve(spec, schemas[name])
    return None


@pytest.mark.parametrize("model", list(MODELS), ids=lambda m: m.__name__)
def test_model_fields_are_the_schema_properties(spec: Dict[str, Any], model: type) -> None:
    schema = schema_of(spec, MODELS[model])
    if schema is None:
        pytest.skip(f"no schema {MODELS[model]} in the spec")
    props = set(schema["properties"])
    fields = wire_fields(model)
    assert fields == props, (
        f"{model.__name__}: only in the model {sorted(fields - props)}, only in the spec {sorted(props - fields)}"
    )


@pytest.mark.parametrize("model", list(MODELS), ids=lambda m: m.__name__)
def test_required_members_are_not_optional(spec: Dict[str, Any], model: type) -> None:
    schema = schema_of(spec, MODELS[model])
    if schema is None:
        pytest.skip("not in the spec")
    assert_required_not_optional(model, schema)


def assert_required_not_optional(model: type, schema: Dict[str, Any]) -> None:
    hints = {f.name: str(f.type) for f in dataclasses.fields(model)}
    for name in schema.get("required", []):
        if name in hints:
            # A required, non-nullable member must not be typed Optional.
            prop = schema["properties"].get(name, {})
            nullable = prop.get("nullable") or "null" in json.dumps(prop.get("type", "")) or any(
                s.get("type") == "null" for s in prop.get("anyOf", []) + prop.get("oneOf", [])
            )
            if not nullable:
                assert "Optional" not in hints[name], f"{model.__name__}.{name} is required by the spec"


def test_livemode_is_a_bool_that_defaults_to_live(spec: Dict[str, Any]) -> None:
    """Every object that says its mode in the spec (``livemode``) says it in the
    model, as a ``bool``; where the spec does not require it (answers stored
    before test mode have none, and were live) the model defaults to ``True``."""
    checked = set()
    for model, names in MODELS.items():
        schema = schema_of(spec, names)
        if schema is None or "livemode" not in schema["properties"]:
            continue
        assert schema["properties"]["livemode"].get("type") == "boolean"
        fields = {f.name: f for f in dataclasses.fields(model)}
        assert "livemode" in fields, f"{model.__name__} has no livemode"
        assert str(fields["livemode"].type) == "bool", f"{model.__name__}.livemode is {fields['livemode'].type}"
        if "livemode" not in schema.get("required", []):
            assert fields["livemode"].default is True, f"{model.__name__}.livemode must default to True (live)"
        checked.add(model.__name__)
    assert {"Payment", "Refund", "Capture", "WebhookEndpoint", "ApiKey"} <= checked, sorted(checked)


def test_history_entries_are_the_schema_variants(spec: Dict[str, Any]) -> None:
    """``HistoryEntry`` is its own members (``seq``, ``at``, ``refund_id``) and
    one ``HistoryEvent`` variant, tagged by ``type``: each variant's entry class
    has exactly the members of both, and every variant has its class."""
    schemas = spec.get("components", {}).get("schemas", {})
    if "HistoryEntry" not in schemas:
        pytest.skip("no HistoryEntry schema in the spec")
    common: Dict[str, Any] = {"properties": {}, "required": []}
    variants: list = []
    for part in schemas["HistoryEntry"].get("allOf", []):
        if "$ref" in part:
            variants = schemas[part["$ref"].rsplit("/", 1)[-1]].get("oneOf", [])
        else:
            common["properties"].update(part.get("properties", {}))
            common["required"] += part.get("required", [])
    assert common["properties"] and variants, "HistoryEntry is not its members and a oneOf of HistoryEvent"
    by_type = {}
    for variant in variants:
        (tag,) = variant["properties"]["type"]["enum"]
        by_type[tag] = {
            "properties": {**common["properties"], **variant["properties"]},
            "required": common["required"] + variant.get("required", []),
        }
    assert set(by_type) == set(HISTORY_ENTRY_TYPES), (
        f"only in the spec {sorted(set(by_type) - set(HISTORY_ENTRY_TYPES))}, "
        f"only in the SDK {sorted(set(HISTORY_ENTRY_TYPES) - set(by_type))}"
    )
    for tag, schema in by_type.items():
        model = HISTORY_ENTRY_TYPES[tag]
        props, fields = set(schema["properties"]), wire_fields(model)
        assert fields == props, (
            f"{model.__name__} ({tag}): only in the model {sorted(fields - props)}, only in the spec {sorted(props - fields)}"
        )
        assert_required_not_optional(model, schema)
    # An entry of a type this SDK does not know keeps the members every entry has.
    assert wire_fields(UnknownHistoryEntry) == set(common["properties"]) | {"type"}


def test_the_problem_codes_are_the_spec_enum(spec: Dict[str, Any]) -> None:
    from chargeonce import ProblemCode

    schema = spec.get("components", {}).get("schemas", {}).get("ProblemCode")
    if not schema or "enum" not in schema:
        pytest.skip("no ProblemCode enum in the spec")
    missing = set(schema["enum"]) - {c.value for c in ProblemCode}
    assert not missing, f"codes the SDK does not name: {sorted(missing)}"


#: The SDK's closed lists, by the enum schema of docs/openapi.json they name:
#: a value the server sends that the SDK lacks (``authorized``) would be misread.
ENUMS = {
    "PaymentStatus": [s.value for s in PaymentStatus],
    "CaptureMethod": [m.value for m in CaptureMethod],
    "CaptureStatus": [s.value for s in CaptureStatus],
    "HistoryAcquirerCall": [c.value for c in HistoryAcquirerCall],
    "HistoryCallOutcome": [o.value for o in HistoryCallOutcome],
    "HistorySettledBy": [b.value for b in HistorySettledBy],
    "EventType": list(webhooks.EVENT_TYPES),
    "ApiKeyScope": [s.value for s in ApiKeyScope],
    "ApiKeyState": [s.value for s in ApiKeyState],
}


@pytest.mark.parametrize("name", list(ENUMS))
def test_the_enumerations_are_the_spec_enums(spec: Dict[str, Any], name: str) -> None:
    schema = spec.get("components", {}).get("schemas", {}).get(name)
    assert schema is not None and "enum" in schema, f"the spec has no enum schema {name}"
    ours = ENUMS[name]
    assert len(set(ours)) == len(ours), f"{name}: a value listed twice"
    assert sorted(ours) == sorted(schema["enum"]), (
        f"{name}: only in the SDK {sorted(set(ours) - set(schema['enum']))}, "
        f"only in the spec {sorted(set(schema['enum']) - set(ours))}"
    )
