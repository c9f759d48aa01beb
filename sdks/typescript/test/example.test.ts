// examples/typescript/checkout.ts, compiled against the built package and run
// against a real server: the fetch snippet pays, the SDK finds the order
// paid, a second run is a replay, and the ledger holds one charge.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { REPO_DIR, SDK_DIR } from "./paths.js";
import { haveBinary, startServer, SECRET, SHOP } from "./harness.js";
import type { Ledger } from "../src/index.js";

test("examples/typescript/checkout.ts compiles and pays once", { timeout: 120_000 }, async (t) => {
  if (!haveBinary()) {
    t.skip("no chargeonce binary (set CHARGEONCE_BIN)");
    return;
  }
  const dir = mkdtempSync(join(tmpdir(), "checkout-ts-"));
  const server = await startServer();
  try {
    copyFileSync(join(REPO_DIR, "examples", "typescript", "checkout.ts"), join(dir, "checkout.ts"));
    mkdirSync(join(dir, "node_modules", "@chargeonce"), { recursive: true });
    symlinkSync(SDK_DIR, join(dir, "node_modules", "@chargeonce", "client"), "dir");
    writeFileSync(join(dir, "package.json"), JSON.stringify({ type: "module", private: true }));
    writeFileSync(
      join(dir, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          target: "ES2022",
          lib: ["ES2022"],
          module: "NodeNext",
          moduleResolution: "NodeNext",
          strict: true,
          noUncheckedIndexedAccess: true,
          outDir: "out",
          types: ["node"],
          typeRoots: [join(SDK_DIR, "node_modules", "@types")],
        },
        files: ["checkout.ts"],
      }),
    );
    execFileSync(process.execPath, [join(SDK_DIR, "node_modules", "typescript", "bin", "tsc"), "-p", dir], { stdio: "pipe" });
    writeFileSync(join(dir, "out", "package.json"), JSON.stringify({ type: "module" }));
    symlinkSync(join(dir, "node_modules"), join(dir, "out", "node_modules"), "dir");
    const env = { ...process.env, CHARGEONCE_URL: server.url, SHOP_ID: SHOP, SECRET_KEY: SECRET };
    const order = `${Date.now()}`;
    const run = () =>
      execFileSync(process.execPath, [join(dir, "out", "checkout.js"), order], { env, encoding: "utf8" })
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line) as Record<string, Record<string, unknown>>);
    const [first, sdk] = run();
    assert.equal(first?.["fetch"]?.["status"], 201);
    assert.equal(first?.["fetch"]?.["replayed"], false);
    assert.equal(sdk?.["sdk"]?.["outcome"], "paid");
    assert.equal(sdk?.["sdk"]?.["foundBeforePaying"], true, "the SDK looked the order up and sent nothing");
    const [again, sdkAgain] = run();
    assert.equal(again?.["fetch"]?.["status"], 201);
    assert.equal(again?.["fetch"]?.["replayed"], true, "the same key: the first answer, replayed");
    assert.equal(sdkAgain?.["sdk"]?.["paymentId"], sdk?.["sdk"]?.["paymentId"]);
    const ledger = (await (await fetch(new URL("/sim/ledger", server.operatorUrl))).json()) as Ledger;
    assert.equal(ledger.charges.filter((c) => c.reference === order && c.status === "succeeded").length, 1);
  } finally {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});
