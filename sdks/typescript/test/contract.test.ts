// The TypeScript models against the contract: the generated types are the
// document's, and the runtime lists (entry types, enumerations) its values.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { HISTORY_ENTRY_TYPES, MERCHANT_EVENT_TYPES, PROBLEM_CODES, SCHEMA_ENUMS } from "../src/index.js";
import { REPO_DIR, SDK_DIR } from "./paths.js";

const SPEC = resolve(REPO_DIR, "docs", "openapi.json");

interface Schema {
  properties?: Record<string, unknown>;
  required?: string[];
  allOf?: Array<Schema & { $ref?: string }>;
  oneOf?: Schema[];
  enum?: string[];
}

// The models are the contract's types: src/contract.ts is what
// openapi-typescript makes of docs/openapi.json, byte for byte. A field the
// contract adds and the models lack, a new history entry type, a changed
// required member: regenerate (`npm run contract`) and the compiler shows
// every use it breaks.
test("src/contract.ts is generated from docs/openapi.json and up to date", (t) => {
  if (!existsSync(SPEC)) {
    t.skip(`no ${SPEC}`);
    return;
  }
  const generator = resolve(SDK_DIR, "node_modules", ".bin", "openapi-typescript");
  const out = resolve(mkdtempSync(join(tmpdir(), "chargeonce-contract-")), "contract.ts");
  execFileSync(generator, [SPEC, "-o", out], { stdio: "pipe" });
  const committed = readFileSync(resolve(SDK_DIR, "src", "contract.ts"), "utf8");
  assert.equal(committed, readFileSync(out, "utf8"), "src/contract.ts drifted from docs/openapi.json: run `npm run contract`");
});

// Every entry type the spec's HistoryEvent has is one the client lists
// (`isKnownHistoryEntry`); the compiler holds the list to the generated union.
test("the client's entry types are the HistoryEvent variants of docs/openapi.json", (t) => {
  if (!existsSync(SPEC)) {
    t.skip(`no ${SPEC}`);
    return;
  }
  const spec = JSON.parse(readFileSync(SPEC, "utf8")) as { components?: { schemas?: Record<string, Schema> } };
  const variants = spec.components?.schemas?.["HistoryEvent"]?.oneOf ?? [];
  const types = variants.map((v) => (v.properties?.["type"] as { enum?: string[] } | undefined)?.enum?.[0]);
  assert.ok(types.length > 0 && types.every((t) => t !== undefined), "HistoryEvent is not a oneOf tagged by type");
  assert.deepEqual([...HISTORY_ENTRY_TYPES].sort(), [...types].sort(), "the client's entry types are the spec's");
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
