// A webhook secret rolled with an overlap (`shops roll-webhook-secret`):
// while it lasts each delivery carries a signature made with each secret,
// and verifyWebhook accepts it with either; once it is over, only the new.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import http from "node:http";
import { join } from "node:path";
import { Client, IdempotencyKey, amount, verifyWebhook, SignatureError, SIGNATURE_HEADER } from "../src/index.js";
import { haveBinary, startServer, SECRET, SHOP, type Server } from "./harness.js";
import { CHARGEONCE_BIN } from "./paths.js";

const OLD_SECRET = "whsec_ts_roll_old_0123456789";
const NEW_SECRET = "whsec_ts_roll_new_0123456789";
const NEWEST_SECRET = "whsec_ts_roll_newest_01234567";

interface Delivery {
  header: string;
  raw: Buffer;
}

function roll(server: Server, secret: string, expireOldIn: string): void {
  execFileSync(
    CHARGEONCE_BIN,
    ["shops", "roll-webhook-secret", "--shop", SHOP, "--secret", secret, "--expire-old-in", expireOldIn,
      "--database-url", `sqlite://${join(server.dir, "db.sqlite")}`],
    { stdio: "pipe" },
  );
}

test("during a secret roll's overlap either secret verifies a delivery", { timeout: 60_000 }, async (t) => {
  if (!haveBinary()) {
    t.skip("no chargeonce binary (set CHARGEONCE_BIN)");
    return;
  }
  const waiting: Array<(d: Delivery) => void> = [];
  const receiver = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      res.writeHead(204).end();
      waiting.shift()?.({ header: String(req.headers[SIGNATURE_HEADER] ?? ""), raw: Buffer.concat(chunks) });
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
  const address = receiver.address();
  assert.ok(address !== null && typeof address !== "string");
  const server = await startServer(["--relay-interval", "200ms"], { url: `http://127.0.0.1:${address.port}/hook`, secret: OLD_SECRET });
  const client = new Client(server.url, SHOP, SECRET);
  const payAndReceive = async (reference: string): Promise<Delivery> => {
    const delivered = new Promise<Delivery>((resolve) => waiting.push(resolve));
    const result = await client.pay(IdempotencyKey.forOperation(reference, "pay"), { amount: amount("15.00", "RUB"), reference, token: "tok_ok" });
    assert.equal(result.outcome.kind, "paid");
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<Delivery>((_, reject) => {
      timer = setTimeout(() => reject(new Error("no event within 20 s")), 20_000);
    });
    try {
      return await Promise.race([delivered, late]);
    } finally {
      clearTimeout(timer);
    }
  };
  try {
    roll(server, NEW_SECRET, "1h");
    const during = await payAndReceive("roll-1");
    assert.equal(during.header.split("v1=").length - 1, 2, during.header);
    verifyWebhook(OLD_SECRET, during.header, during.raw);
    verifyWebhook(NEW_SECRET, during.header, during.raw);

    roll(server, NEWEST_SECRET, "0s");
    const after = await payAndReceive("roll-2");
    assert.equal(after.header.split("v1=").length - 1, 1, after.header);
    verifyWebhook(NEWEST_SECRET, after.header, after.raw);
    assert.throws(() => verifyWebhook(NEW_SECRET, after.header, after.raw), (e: unknown) => e instanceof SignatureError && e.kind === "mismatch");
  } finally {
    await server.stop();
    receiver.close();
  }
});
