// A real `chargeonce serve` (temporary SQLite, in-process simulator, one shop
// added with `chargeonce shops add`) and a small fault proxy that loses answers
// and records every request it receives.
import { spawn, execFileSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import http from "node:http";
import { CHARGEONCE_BIN } from "./paths.js";

export const SHOP = "tsshop";
export const SECRET = "sk_ts_0123456789abcdef0123";
// The test merchant listens on loopback over http: allowed explicitly.
const WEBHOOK_ARGS = ["--webhook-allow-http", "--webhook-allow-networks", "127.0.0.0/8"];

export interface Server {
  url: string;
  /** The operator listener (the console, `/metrics`, the simulator's `/sim`). */
  operatorUrl: string;
  dir: string;
  /** The store `serve` and the CLI use (`sqlite://...`). */
  databaseUrl: string;
  stop(): Promise<void>;
}

/**
 * `chargeonce shops keys add` against the server's store: the new key's
 * secret (`sk_test_...` for a `test` key).
 */
export function makeKey(server: Server, mode: "live" | "test" = "test", scope: "full" | "read_only" | "payments" = "full"): string {
  const out = execFileSync(
    CHARGEONCE_BIN,
    ["shops", "keys", "add", "--shop", SHOP, "--mode", mode, "--scope", scope, "--database-url", server.databaseUrl],
    { stdio: "pipe" },
  ).toString();
  // "secret key (shown once, store it now): sk_test_..."
  const secret = /secret key \(shown once, store it now\): (\S+)/.exec(out)?.[1];
  if (secret === undefined) throw new Error(`chargeonce shops keys add printed no secret:\n${out}`);
  return secret;
}

export function haveBinary(): boolean {
  return existsSync(CHARGEONCE_BIN);
}

/** `otherShops`: more shops added the same way as {@link SHOP}, before `serve`. */
export async function startServer(
  args: string[] = [],
  webhook?: { url: string; secret: string },
  otherShops: Array<{ shop: string; secret: string }> = [],
): Promise<Server> {
  const dir = mkdtempSync(join(tmpdir(), "chargeonce-ts-"));
  const db = `sqlite://${join(dir, "db.sqlite")}`;
  execFileSync(CHARGEONCE_BIN, ["shops", "add", SHOP, "--secret", SECRET, "--database-url", db], { stdio: "pipe" });
  for (const other of otherShops) {
    execFileSync(CHARGEONCE_BIN, ["shops", "add", other.shop, "--secret", other.secret, "--database-url", db], { stdio: "pipe" });
  }
  if (webhook !== undefined) {
    execFileSync(
      CHARGEONCE_BIN,
      ["shops", "set-webhook", "--shop", SHOP, "--url", webhook.url, "--secret", webhook.secret, "--database-url", db, ...WEBHOOK_ARGS],
      { stdio: "pipe" },
    );
  }
  const child: ChildProcess = spawn(
    CHARGEONCE_BIN,
    [
      "serve",
      ...WEBHOOK_ARGS,
      "--database-url", db,
      "--sim-ledger", join(dir, "sim.db"),
      "--test-sim-ledger", join(dir, "test-sim.db"),
      "--listen", "127.0.0.1:0",
      "--operator-listen", "127.0.0.1:0",
      "--sim-slow", "2s",
      "--rate-limit", "0",
      "--no-demo-shop",
      ...args,
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  let log = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    log += chunk.toString();
    if (log.length > 100_000) log = log.slice(-50_000);
  });
  let operatorUrl = "";
  const url = await new Promise<string>((resolve, reject) => {
    let out = "";
    const timer = setTimeout(() => reject(new Error(`chargeonce serve did not start:\n${out}\n${log}`)), 15_000);
    child.stdout?.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      // The operator listener's line comes first (the console, /metrics, /sim).
      const operator = /operator listener at (http:\/\/[^\s]+)/.exec(out);
      if (operator?.[1]) operatorUrl = operator[1];
      const m = /chargeonce listening on (http:\/\/[^\s]+)/.exec(out);
      if (m?.[1]) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    child.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`chargeonce serve exited with ${code}:\n${out}\n${log}`));
    });
  });
  child.stdout?.resume();
  return {
    url,
    operatorUrl,
    dir,
    databaseUrl: db,
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((resolve) => child.once("exit", resolve));
        child.kill("SIGTERM");
        const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
        await exited;
        clearTimeout(timer);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface LoseRule {
  method: string;
  path: string;
  /** The `Idempotency-Key` the rule is about, when it names an order. */
  key?: string;
  /** How many more answers to lose; `undefined`: without end. */
  count?: number;
}

/** One request as the proxy received it, before forwarding. */
export interface RecordedRequest {
  method: string;
  /** Without the query. */
  path: string;
  /** The `Idempotency-Key` header; `undefined` when absent. */
  key: string | undefined;
  /** The exact body bytes. */
  body: Buffer;
}

export interface Proxy {
  url: string;
  /** How many answers it lost. */
  lost: number;
  /** Every request it received, in arrival order (lost answers included). */
  readonly requests: readonly RecordedRequest[];
  stop(): Promise<void>;
}

/**
 * The retry invariant on what a proxy recorded: every request carrying one
 * `Idempotency-Key` had the same method, path and byte-identical body. Returns
 * how many requests each key had, in first-seen order.
 */
export function checkSameBytesPerKey(requests: readonly RecordedRequest[], where: string): Map<string, number> {
  const first = new Map<string, RecordedRequest>();
  const counts = new Map<string, number>();
  for (const [i, r] of requests.entries()) {
    if (r.key === undefined) continue;
    const seen = first.get(r.key);
    if (seen === undefined) {
      first.set(r.key, r);
    } else {
      const what = `${where}: request ${i} with key ${JSON.stringify(r.key)}`;
      if (r.method !== seen.method || r.path !== seen.path) {
        throw new Error(`${what} is ${r.method} ${r.path}, the first with that key was ${seen.method} ${seen.path}`);
      }
      if (!r.body.equals(seen.body)) {
        throw new Error(`${what} has other body bytes than the first:\n  ${seen.body.toString("hex")}\n  ${r.body.toString("hex")}`);
      }
    }
    counts.set(r.key, (counts.get(r.key) ?? 0) + 1);
  }
  return counts;
}

/**
 * A plain HTTP/1.1 proxy. Every request is recorded (method, path, key, body
 * bytes) once its body is read. A request matching a rule with `count` left is
 * forwarded, its whole answer read (the server executed it), and then the
 * client's connection is closed without a byte of it. Everything else is
 * forwarded and answered, with `Connection: close`.
 */
export async function startProxy(upstream: string, rules: LoseRule[]): Promise<Proxy> {
  const target = new URL(upstream);
  const state = { lost: 0 };
  const requests: RecordedRequest[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      const path = (req.url ?? "/").split("?")[0] ?? "/";
      const header = req.headers["idempotency-key"];
      const key = Array.isArray(header) ? header.join(", ") : header;
      requests.push({ method: req.method ?? "", path, key, body: Buffer.from(body) });
      const rule = rules.find(
        (r) => r.method === req.method && r.path === path && (r.key === undefined || r.key === key),
      );
      const lose = rule !== undefined && (rule.count === undefined || rule.count > 0);
      if (lose && rule.count !== undefined) rule.count -= 1;
      const headers = { ...req.headers, host: target.host, connection: "close" };
      const upstreamReq = http.request(
        { host: target.hostname, port: target.port, method: req.method, path: req.url, headers },
        (upstreamRes) => {
          const answer: Buffer[] = [];
          upstreamRes.on("data", (c: Buffer) => answer.push(c));
          upstreamRes.on("end", () => {
            if (lose) {
              state.lost += 1;
              req.socket.destroy();
              return;
            }
            const out = { ...upstreamRes.headers, connection: "close" };
            res.writeHead(upstreamRes.statusCode ?? 502, out);
            res.end(Buffer.concat(answer));
          });
        },
      );
      upstreamReq.on("error", () => req.socket.destroy());
      upstreamReq.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("no proxy address");
  return {
    url: `http://127.0.0.1:${address.port}`,
    get lost() {
      return state.lost;
    },
    requests,
    async stop() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
