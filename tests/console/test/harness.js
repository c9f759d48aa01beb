// @ts-check
// The world the console test runs in: a real `chargeonce serve` (a fresh
// SQLite file, the in-process acquirer simulator, a shop added with `chargeonce
// shops add`, its webhook pointing at a local receiver, an operator secret of
// our choosing), the shop API over fetch, and the acquirer's ledger.
//
// Nothing here waits a fixed time: every wait is for an event (a line on
// stdout, a request arriving, an answer) or a bounded poll of a condition.
import { spawn, execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { tmpdir } from "node:os";
import { join, resolve, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import http from "node:http";

/** `tests/console`. */
export const SUITE_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "..");
/** The repository root. */
export const REPO_DIR = process.env["CHARGEONCE_REPO"] ?? resolve(SUITE_DIR, "..", "..");
/** The server binary. */
export const CHARGEONCE_BIN = process.env["CHARGEONCE_BIN"] ?? resolve(REPO_DIR, "target", "debug", "chargeonce");

/**
 * A fresh random secret with a readable prefix (hex, so any parser takes it).
 * @param {string} prefix
 */
export function secret(prefix) {
  return `${prefix}${randomBytes(16).toString("hex")}`;
}

/**
 * Runs the binary to its end.
 * @param {string[]} args
 * @returns {Promise<{code: number, stdout: string, stderr: string}>}
 */
export function run(args) {
  return new Promise((resolvePromise) => {
    execFile(CHARGEONCE_BIN, args, { maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === "number" ? error.code : 1;
      resolvePromise({ code, stdout: stdout.toString(), stderr: stderr.toString() });
    });
  });
}

/**
 * Runs the binary and fails unless it exits 0.
 * @param {string[]} args
 */
export async function runOk(args) {
  const out = await run(args);
  if (out.code !== 0) {
    throw new Error(`chargeonce ${args.join(" ")} exited ${out.code}:\n${out.stdout}\n${out.stderr}`);
  }
  return out;
}

/**
 * A child process that prints `... listening on http://...` once it serves.
 * @typedef {{url: string, output: () => string, stop: () => Promise<void>}} Process
 */

/**
 * Starts the binary and resolves with the URL it prints on stdout.
 * @param {string[]} args
 * @param {RegExp} ready the line's pattern, the URL as its first group
 * @returns {Promise<Process>}
 */
export function startProcess(args, ready) {
  const child = spawn(CHARGEONCE_BIN, args, { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  let log = "";
  child.stderr.on("data", (chunk) => {
    log += chunk.toString();
    if (log.length > 400_000) log = log.slice(-200_000);
  });
  let started = false;
  return new Promise((resolvePromise, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`chargeonce ${args[0]} did not start within 30 s:\n${out}\n${log}`));
    }, 30_000);
    const onExit = (/** @type {number | null} */ code) => {
      clearTimeout(timer);
      reject(new Error(`chargeonce ${args.join(" ")} exited with ${code}:\n${out}\n${log}`));
    };
    child.on("exit", onExit);
    child.stdout.on("data", (chunk) => {
      out += chunk.toString();
      const m = ready.exec(out);
      if (m?.[1] !== undefined && !started) {
        started = true;
        clearTimeout(timer);
        child.off("exit", onExit);
        const url = m[1];
        resolvePromise({
          url,
          output: () => out + log,
          async stop() {
            if (child.exitCode !== null || child.signalCode !== null) return;
            const exited = new Promise((r) => child.once("exit", r));
            child.kill("SIGTERM");
            const kill = setTimeout(() => child.kill("SIGKILL"), 10_000);
            await exited;
            clearTimeout(kill);
          },
        });
      }
    });
  });
}

/**
 * A local merchant receiving the shop's webhooks: answers 200 to every POST
 * and remembers each delivery's event id, so a test can wait for one.
 * @typedef {{url: string, deliveries: {eventId: string, body: string}[],
 *   waitFor: (predicate: (d: {eventId: string, body: string}[]) => boolean, what: string, ms?: number) => Promise<void>,
 *   stop: () => Promise<void>}} Receiver
 * @returns {Promise<Receiver>}
 */
export async function startReceiver() {
  /** @type {{eventId: string, body: string}[]} */
  const deliveries = [];
  /** @type {Set<() => void>} */
  const listeners = new Set();
  const server = http.createServer((req, res) => {
    const chunks = /** @type {Buffer[]} */ ([]);
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      const header = req.headers["chargeonce-event-id"];
      deliveries.push({
        eventId: Array.isArray(header) ? header.join(",") : header ?? "",
        body: Buffer.concat(chunks).toString(),
      });
      res.writeHead(200, { "content-type": "text/plain" });
      res.end("ok");
      for (const listener of listeners) listener();
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", () => r(undefined)));
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("no receiver address");
  return {
    url: `http://127.0.0.1:${address.port}/webhooks/chargeonce`,
    deliveries,
    waitFor(predicate, what, ms = 30_000) {
      return new Promise((resolvePromise, reject) => {
        if (predicate(deliveries)) return resolvePromise();
        const listener = () => {
          if (predicate(deliveries)) {
            clearTimeout(timer);
            listeners.delete(listener);
            resolvePromise();
          }
        };
        const timer = setTimeout(() => {
          listeners.delete(listener);
          reject(new Error(`the receiver did not see ${what} within ${ms} ms (deliveries: ${JSON.stringify(deliveries.map((d) => d.eventId))})`));
        }, ms);
        listeners.add(listener);
      });
    },
    async stop() {
      server.closeAllConnections();
      await new Promise((r) => server.close(() => r(undefined)));
    },
  };
}

/**
 * Polls `check` until it returns something other than `undefined`, at most
 * `ms`; between tries it waits `every` ms (a bounded poll of a condition the
 * service reaches on its own clock, such as a key's expiry).
 * @template T
 * @param {() => Promise<T | undefined>} check
 * @param {string} what
 * @param {{ms?: number, every?: number}} [opts]
 * @returns {Promise<T>}
 */
export async function until(check, what, { ms = 30_000, every = 200 } = {}) {
  const deadline = Date.now() + ms;
  /** @type {unknown} */
  let last;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) {
      throw new Error(`${what}: not reached within ${ms} ms${last === undefined ? "" : ` (last error: ${String(last)})`}`);
    }
    await new Promise((r) => setTimeout(r, every));
  }
}

/**
 * The world: the service and what it needs.
 * @typedef {{
 *   url: string, operatorUrl: string, dir: string, db: string, ledger: string,
 *   shop: string, shopSecret: string, webhookSecret: string, operatorSecret: string,
 *   keyTtlMs: number, receiver: Receiver, server: Process, hasConsole: boolean,
 *   stop: () => Promise<void>}} World
 */

/**
 * Starts everything: the receiver, the shop (and its webhook), and `serve`.
 * @returns {Promise<World>}
 */
export async function startWorld() {
  const dir = mkdtempSync(join(tmpdir(), "chargeonce-console-"));
  const db = `sqlite://${join(dir, "store.db")}`;
  const ledger = join(dir, "sim.db");
  const shop = "console-shop";
  const shopSecret = secret("sk_console_");
  const webhookSecret = secret("whsec_console_");
  const operatorSecret = secret("op_console_");
  const receiver = await startReceiver();
  await runOk(["shops", "add", shop, "--secret", shopSecret, "--database-url", db]);
  // The receiver listens on loopback over http: allowed explicitly.
  const webhookArgs = ["--webhook-allow-http", "--webhook-allow-networks", "127.0.0.0/8"];
  await runOk(["shops", "set-webhook", "--shop", shop, "--url", receiver.url, "--secret", webhookSecret, "--database-url", db, ...webhookArgs]);
  const help = (await run(["serve", "--help"])).stdout;
  const hasConsole = help.includes("--operator-secret");
  // Keys live a few seconds, so the test can wait for one to expire; long
  // enough for the retry, the double click, the changed amount and the
  // flush of cached repeats to land first.
  const keyTtlMs = 6_000;
  const args = [
    "serve",
    ...webhookArgs,
    "--database-url", db,
    "--sim-ledger", ledger,
    "--listen", "127.0.0.1:0",
    // The console, /metrics and /sim are served here only.
    "--operator-listen", "127.0.0.1:0",
    "--no-demo-shop",
    "--rate-limit", "0",
    // A revoked API key is refused within this (test 10e).
    "--auth-cache-ttl", "2s",
    "--key-ttl", `${keyTtlMs}ms`,
    "--sweep-interval", "500ms",
    "--relay-interval", "200ms",
    "--reconcile-interval", "2s",
    // The retry, not the completer, resumes the payment whose answer was lost.
    "--no-completer",
  ];
  if (hasConsole) args.push("--operator-secret", operatorSecret);
  const server = await startProcess(args, /chargeonce listening on (http:\/\/[^\s]+)/);
  // Printed before the listening line, so it is in the output already.
  const operator = /operator listener at (http:\/\/[^\s]+)/.exec(server.output());
  if (operator?.[1] === undefined) throw new Error(`no operator listener line:\n${server.output()}`);
  return {
    url: server.url,
    operatorUrl: operator[1],
    dir,
    db,
    ledger,
    shop,
    shopSecret,
    webhookSecret,
    operatorSecret,
    keyTtlMs,
    receiver,
    server,
    hasConsole,
    async stop() {
      await server.stop();
      await receiver.stop();
      if (process.env["CHARGEONCE_CONSOLE_KEEP"] === "1") {
        console.log(`kept ${dir}`);
      } else {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}

/**
 * One answer of the shop API.
 * @typedef {{status: number, headers: Headers, text: string, json: any}} Answer
 */

/**
 * A request to the shop API with the shop's Basic auth.
 * @param {World} world
 * @param {string} method
 * @param {string} path
 * @param {{body?: unknown, key?: string}} [opts]
 * @returns {Promise<Answer>}
 */
export async function api(world, method, path, { body, key } = {}) {
  /** @type {Record<string, string>} */
  const headers = {
    authorization: `Basic ${Buffer.from(`${world.shop}:${world.shopSecret}`).toString("base64")}`,
  };
  if (key !== undefined) headers["idempotency-key"] = key;
  /** @type {RequestInit} */
  const init = { method, headers, redirect: "manual" };
  if (body !== undefined) {
    headers["content-type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const res = await fetch(`${world.url}${path}`, init);
  const text = await res.text();
  let json = null;
  try {
    json = JSON.parse(text);
  } catch {
    json = null;
  }
  return { status: res.status, headers: res.headers, text, json };
}

/**
 * The acquirer's ledger, the ground truth of what moved.
 * @param {World} world
 * @returns {Promise<{charges: any[]}>}
 */
export async function ledger(world) {
  const res = await fetch(`${world.operatorUrl}/sim/ledger`);
  if (res.status !== 200) throw new Error(`GET /sim/ledger: ${res.status}`);
  return /** @type {any} */ (await res.json());
}

/**
 * Plants a charge in the simulator's ledger, as a drill for the reconciler:
 * the standalone acquirer (`chargeonce acquirer`) opens the same ledger file
 * and takes `POST /admin/charges`; the in-process simulator has no such route.
 * @param {World} world
 * @param {Record<string, unknown>} charge
 */
export async function plantCharge(world, charge) {
  const acquirer = await startProcess(
    ["acquirer", "--listen", "127.0.0.1:0", "--database", world.ledger],
    /chargeonce acquirer listening on (http:\/\/[^\s]+)/,
  );
  try {
    const res = await fetch(`${acquirer.url}/admin/charges`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(charge),
    });
    const text = await res.text();
    if (res.status !== 201) throw new Error(`POST /admin/charges: ${res.status} ${text}`);
    return JSON.parse(text);
  } finally {
    await acquirer.stop();
  }
}
