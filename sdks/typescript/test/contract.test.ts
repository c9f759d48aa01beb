// The TypeScript models against the contract: each interface's field table
// (kept equal to the interface by the compiler) must list exactly the
// properties of the component schema, with the same required ones.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { resolve } from "node:path";
import { SCHEMA_TABLES } from "../src/index.js";
import { REPO_DIR } from "./paths.js";

const SPEC = resolve(REPO_DIR, "docs", "openapi.json");

interface Schema {
  properties?: Record<string, unknown>;
  required?: string[];
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
  for (const needed of ["Payment", "Refund", "Amount", "Problem"]) {
    assert.ok(compared.includes(needed), `the spec has no ${needed} schema`);
  }
  t.diagnostic(`compared: ${compared.join(", ")}`);
});
