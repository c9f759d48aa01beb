// The TypeScript models against the contract: each interface's field table
// (kept equal to the interface by the compiler) must list exactly the
// properties of the component schema, with the same required ones.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { resolve } from "node:path";
import { HISTORY_ENTRY_TABLES, HISTORY_ENTRY_TYPES, MERCHANT_EVENT_TYPES, PROBLEM_CODES, SCHEMA_ENUMS, SCHEMA_TABLES } from "../src/index.js";
import { REPO_DIR } from "./paths.js";

const SPEC = resolve(REPO_DIR, "docs", "openapi.json");

interface Schema {
  properties?: Record<string, unknown>;
  required?: string[];
  allOf?: Array<Schema & { $ref?: string }>;
  oneOf?: Schema[];
  enum?: string[];
}

test("the model interfaces have the fields of docs/openapi.json", (t) => {
  if (!existsSync(SPEC)) {
    t.skip(`no ${SPEC}`);
    return;
  }
  const spec = JSON.parse(readFileSync(SPEC, "utf8")) as { components?: { schemas?: Record<string, Schema> } };
  const schemas = spec.components?.schemas ?? {};
  const compared: string[] = [];
  for (const [name, table] of Object.entries(SCHEMA_TABLES)) {
    // A generic schema is spelled `List_Payment`, `List_Event`, ...: each must match.
    const matching = Object.keys(schemas).filter((s) => s === name || s.startsWith(`${name}_`));
    for (const schemaName of matching) {
      const schema = schemas[schemaName]!;
      const specFields = Object.keys(schema.properties ?? {}).sort();
      const ours = Object.keys(table).sort();
      assert.deepEqual(ours, specFields, `${schemaName}: the fields of the TypeScript interface differ from the spec's properties`);
      const specRequired = [...(schema.required ?? [])].sort();
      const ourRequired = Object.entries(table)
        .filter(([, presence]) => presence === "required")
        .map(([field]) => field)
        .sort();
      assert.deepEqual(ourRequired, specRequired, `${schemaName}: the required fields differ from the spec's`);
      compared.push(schemaName);
    }
  }
  for (const needed of ["Payment", "Refund", "Amount", "Problem", "PaymentHistory", "HistoryKey", "HistoryTally"]) {
    assert.ok(compared.includes(needed), `the spec has no ${needed} schema`);
  }
  t.diagnostic(`compared: ${compared.join(", ")}`);
});

// `HistoryEntry` is its own members (`seq`, `at`, `refund_id`) and one
// `HistoryEvent` variant, tagged by `type`: each entry type's table must list
// exactly the members of both, with the same required ones, and every variant
// of the spec must have its table (and no table a variant the spec lacks).
test("the history entry tables are the HistoryEntry variants of docs/openapi.json", (t) => {
  if (!existsSync(SPEC)) {
    t.skip(`no ${SPEC}`);
    return;
  }
  const spec = JSON.parse(readFileSync(SPEC, "utf8")) as { components?: { schemas?: Record<string, Schema> } };
  const schemas = spec.components?.schemas ?? {};
  const entry = schemas["HistoryEntry"];
  assert.ok(entry !== undefined, "the spec has no HistoryEntry schema");
  const common: Record<string, unknown> = {};
  const commonRequired: string[] = [];
  let variants: Schema[] = [];
  for (const part of entry.allOf ?? []) {
    if (part.$ref !== undefined) {
      variants = schemas[part.$ref.split("/").pop() ?? ""]?.oneOf ?? [];
    } else {
      Object.assign(common, part.properties ?? {});
      commonRequired.push(...(part.required ?? []));
    }
  }
  assert.ok(Object.keys(common).length > 0 && variants.length > 0, "HistoryEntry is not its members and a oneOf of HistoryEvent");
  const tables: Readonly<Record<string, Readonly<Record<string, string>>>> = HISTORY_ENTRY_TABLES;
  const seen: string[] = [];
  for (const variant of variants) {
    const tag = (variant.properties?.["type"] as { enum?: string[] } | undefined)?.enum;
    assert.ok(tag?.length === 1, `a HistoryEvent variant without one type: ${JSON.stringify(variant)}`);
    const type = tag[0]!;
    seen.push(type);
    const table = tables[type];
    assert.ok(table !== undefined, `the spec's entry type ${type} has no table in the client`);
    const specFields = [...new Set([...Object.keys(common), ...Object.keys(variant.properties ?? {})])].sort();
    assert.deepEqual(Object.keys(table).sort(), specFields, `${type}: the fields of the TypeScript interface differ from the spec's`);
    const specRequired = [...new Set([...commonRequired, ...(variant.required ?? [])])].sort();
    const ourRequired = Object.entries(table)
      .filter(([, presence]) => presence === "required")
      .map(([field]) => field)
      .sort();
    assert.deepEqual(ourRequired, specRequired, `${type}: the required fields differ from the spec's`);
  }
  assert.deepEqual([...HISTORY_ENTRY_TYPES].sort(), seen.sort(), "the client's entry types are the spec's");
  t.diagnostic(`entry types compared: ${seen.join(", ")}`);
});

// Each closed enumeration of the client (a payment's `status`, a key's
// recovery point, the problem codes, the event types, ...) must list exactly
// the values of the spec's enum schema: a value the server sends that the
// client lacks (`canceled`) would be refused or misread.
test("the client's enumerations are the enum schemas of docs/openapi.json", (t) => {
  if (!existsSync(SPEC)) {
    t.skip(`no ${SPEC}`);
    return;
  }
  const spec = JSON.parse(readFileSync(SPEC, "utf8")) as { components?: { schemas?: Record<string, Schema> } };
  const schemas = spec.components?.schemas ?? {};
  const enums: Record<string, readonly string[]> = { ...SCHEMA_ENUMS, ProblemCode: PROBLEM_CODES, EventType: MERCHANT_EVENT_TYPES };
  for (const [name, ours] of Object.entries(enums)) {
    const values = schemas[name]?.enum;
    assert.ok(values !== undefined, `the spec has no enum schema ${name}`);
    assert.deepEqual([...ours].sort(), [...values].sort(), `${name}: the client's values differ from the spec's enum`);
    assert.equal(new Set(ours).size, ours.length, `${name}: a value listed twice`);
  }
  t.diagnostic(`enums compared: ${Object.keys(enums).join(", ")}`);
});
