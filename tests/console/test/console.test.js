// @ts-check
// The operator console in a real headless Chromium, against a real
// `chargeonce serve`: the seed article's incident ("I was charged 3000 for a
// 1500 order") is played through the shop API, then an operator logs in and
// reads it back (one charge, the lost answer, the retry that resumed it, the
// double click, the changed amount, the expired key's reuse), resends a
// merchant event, and resolves a reconciliation finding. Every page is
// photographed on the way (docs/console/*.png).
//
// The steps share one service and run in order; each waits for an event (a
// selector, a response, a request reaching the receiver) or polls a
// condition with a bound, never a fixed sleep.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { chromium } from "playwright-core";
import { REPO_DIR, api, ledger, plantCharge, run, runOk, startWorld, until } from "./harness.js";

/** @typedef {import("playwright-core").Page} Page */
/** @typedef {import("playwright-core").Browser} Browser */
/** @typedef {import("./harness.js").World} World */

const CHROMIUM = process.env["CHARGEONCE_CHROMIUM"] ?? "/usr/bin/chromium";
/** Screenshots always go here (CI keeps them as artifacts, the tree stays clean). */
const SHOT_DIR = join(REPO_DIR, "target", "console-screenshots");
/** ... and here only when asked: the README's pictures. */
const DOC_SHOT_DIR = join(REPO_DIR, "docs", "console");
const WRITE_DOC_SHOTS = process.env["CHARGEONCE_CONSOLE_SCREENSHOTS"] === "1";

/** The seed's order: 1500.00, one intent to pay, one key for every attempt. */
const ORDER = "order-123";
const KEY = `${ORDER}-pay`;
const AMOUNT = { value: "1500.00", currency: "RUB" };
/** `tok_timeout`: the simulator charges, then loses its first answer. */
/** The shop's own pairs; one value is markup, which the console must show as text. */
const METADATA = { customer: "cus_42", note: "<b>gift</b> wrap" };
const BODY = { amount: AMOUNT, reference: ORDER, payment_method: { token: "tok_timeout" }, metadata: METADATA };
/** The frontend "applies a coupon": the same key, another amount. */
const CHANGED = { ...BODY, amount: { value: "3000.00", currency: "RUB" } };
/** A second order, paid once, then charged twice behind our back (a drill). */
const OTHER = "order-124";
const NOTE = "refunded the planted second charge at the acquirer by hand (drill)";

/** @type {World} */
let world;
/** The secret of the key test 10e makes and revokes, for test 11's check. */
let lostSecret = "";
/** The secret of the test-mode key made in 10f. */
let testSecret = "";
/** @type {Browser} */
let browser;
/** @type {Page} */
let page;
/** The incident's payment id, once step 1 made it. */
let paymentId = "";
/** The second order's payment id. */
let otherPaymentId = "";
/** Errors thrown by page scripts, and requests that left the service. */
const pageErrors = /** @type {string[]} */ ([]);
const foreignRequests = /** @type {string[]} */ ([]);
/** The HTML of every console page seen, to check no secret is ever shown. */
const seenHtml = /** @type {Map<string, string>} */ (new Map());

/**
 * A full-page screenshot of the current page.
 * @param {string} name
 */
async function shot(name) {
  mkdirSync(SHOT_DIR, { recursive: true });
  await page.screenshot({ path: join(SHOT_DIR, `${name}.png`), fullPage: true });
  if (WRITE_DOC_SHOTS) {
    mkdirSync(DOC_SHOT_DIR, { recursive: true });
    await page.screenshot({ path: join(DOC_SHOT_DIR, `${name}.png`), fullPage: true });
  }
}

/** Keeps the current page's HTML for the secrets check. */
async function remember() {
  seenHtml.set(page.url(), await page.content());
}

/**
 * Opens a console page (a path under the service) and waits for it to load.
 * @param {string} path
 */
async function open(path) {
  const res = await page.goto(`${world.operatorUrl}${path}`);
  assert.ok(res !== null, `no answer to ${path}`);
  assert.equal(res.status(), 200, `GET ${path} -> ${res.status()} (${page.url()})`);
  await page.locator("nav[data-testid=nav]").waitFor();
  await remember();
}

/** The payment page's timeline, oldest first. */
function timeline() {
  return page.locator("ol[data-testid=timeline] li[data-testid=timeline-entry]").evaluateAll((lis) =>
    lis.map((li) => ({
      type: li.getAttribute("data-type"),
      outcome: li.getAttribute("data-outcome"),
      call: li.getAttribute("data-call"),
      status: li.getAttribute("data-status"),
      text: (li.textContent ?? "").replace(/\s+/g, " ").trim(),
    })),
  );
}

/**
 * The count shown in one of a key's repeat summaries (its first number).
 * @param {string} key
 * @param {"replays" | "conflicts" | "mismatches"} kind
 */
async function repeatCount(key, kind) {
  const text = await page.locator(`[data-testid=key-repeats][data-key="${key}"] [data-testid=${kind}]`).innerText();
  const m = /\d+/.exec(text);
  assert.ok(m !== null, `no count in the ${kind} of ${key}: ${JSON.stringify(text)}`);
  return Number(m[0]);
}

/**
 * Submits a POST form by clicking `button`, and waits for the
 * Post/Redirect/Get to land: the page after the redirect with its flash.
 * @param {import("playwright-core").Locator} button
 */
async function submitAction(button) {
  const posted = page.waitForResponse((r) => r.request().method() === "POST" && r.url().startsWith(`${world.operatorUrl}/console`));
  await button.click();
  const res = await posted;
  assert.equal(res.status(), 303, `the action's POST ${res.url()} -> ${res.status()}, not a 303 back to the page`);
  await page.waitForLoadState("load");
  await page.locator("[data-testid=flash]").first().waitFor();
  await remember();
  return (await page.locator("[data-testid=flash]").first().innerText()).trim();
}

/**
 * A POST of the shop API's payment.
 * @param {unknown} body
 */
function pay(body) {
  return api(world, "POST", "/v1/payments", { key: KEY, body });
}

/** @param {string} reference */
async function chargesOf(reference) {
  return (await ledger(world)).charges.filter((c) => c.reference === reference);
}

describe("the operator console, with the seed incident", () => {
  before(async () => {
    world = await startWorld();
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run"],
    });
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    page = await context.newPage();
    page.setDefaultTimeout(15_000);
    page.on("pageerror", (error) => pageErrors.push(`${page.url()}: ${error.message}`));
    page.on("dialog", (dialog) => void dialog.accept());
    page.on("request", (req) => {
      const own = req.url().startsWith(world.operatorUrl) || req.url().startsWith(world.url);
      if (!own && !req.url().startsWith("data:") && !req.url().startsWith("about:")) {
        foreignRequests.push(req.url());
      }
    });
  });

  after(async () => {
    await browser?.close();
    await world?.stop();
  });

  it("1. the incident through the shop API: a lost answer, its retry, a double click, a changed amount, an expired key; one charge", async () => {
    // The first click: the acquirer charges, its answer is lost. The
    // service does not guess: 202 pending.
    const first = await pay(BODY);
    assert.equal(first.status, 202, `the first attempt: ${first.text}`);
    assert.equal(first.json.status, "pending");
    paymentId = first.json.id;
    assert.match(paymentId, /^pay_/);

    // The client retries with the same key and body: the retry takes the
    // released key over and resumes the payment; the acquirer, idempotent
    // on its own key, answers with the charge it made.
    const retry = await pay(BODY);
    assert.equal(retry.status, 201, `the retry: ${retry.text}`);
    assert.equal(retry.json.id, paymentId);
    assert.equal(retry.json.status, "succeeded");
    assert.equal(retry.headers.get("idempotent-replayed"), null, "the retry executed (resumed), it is no replay");

    // The double click: the same key again, answered with the stored bytes.
    const again = await pay(BODY);
    assert.equal(again.status, 201);
    assert.equal(again.headers.get("idempotent-replayed"), "true");
    assert.equal(again.text, retry.text, "a replay is byte-identical");

    // A coupon: the same key with 3000.00 is a client bug, refused.
    const changed = await pay(CHANGED);
    assert.equal(changed.status, 422, changed.text);
    assert.equal(changed.json.code, "idempotency_key_reused");

    let charges = await chargesOf(ORDER);
    assert.equal(charges.length, 1, `one charge so far: ${JSON.stringify(charges)}`);

    // Repeats answered from the instance's cache reach the key's row in
    // batches; let them land before the key expires (and its counts are
    // copied into the history), bounded.
    await until(async () => {
      const key = await api(world, "GET", `/v1/idempotency-keys/${KEY}`);
      return key.status === 200 && key.json.repeats >= 2 ? true : undefined;
    }, "the key's repeats counted", { ms: 2_500 }).catch((error) => {
      console.log(`note: ${error.message}`);
    });

    // The key expires (its TTL is a few seconds here): the introspection
    // API says 404 once its retention ran out.
    await until(async () => {
      const key = await api(world, "GET", `/v1/idempotency-keys/${KEY}`);
      return key.status === 404 ? true : undefined;
    }, `the key ${KEY} expired`, { ms: world.keyTtlMs + 30_000, every: 250 });
    // ... and the sweeper removed it, copying its repeat counts into the
    // payment's history (`key_expired`), before the customer comes back:
    // otherwise the reuse would re-claim the expired row in place. Read
    // from the shop API's history of the payment.
    await until(async () => {
      const history = await api(world, "GET", `/v1/payments/${paymentId}/history`);
      if (history.status === 200) {
        return history.json.entries.some((/** @type {any} */ e) => e.type === "key_expired" && e.key === KEY) ? true : undefined;
      }
      throw new Error(`GET /v1/payments/${paymentId}/history: ${history.status} ${history.text.slice(0, 200)}`);
    }, "the expired key swept into the history", { ms: 15_000, every: 250 }).catch((error) => {
      // Not this step's promise (the console's timeline checks it): go on.
      console.log(`note: ${error.message}`);
    });

    // The customer comes back with the same key: the key is new again, but
    // the order already has a succeeded payment, and that is the answer.
    const late = await pay(BODY);
    assert.equal(late.status, 200, `the expired key's reuse: ${late.text}`);
    assert.equal(late.json.id, paymentId, "answered with the same payment");
    assert.equal(late.json.status, "succeeded");

    charges = await chargesOf(ORDER);
    assert.equal(charges.length, 1, `1500.00 charged once, not 3000.00: ${JSON.stringify(charges)}`);
    assert.equal(charges[0].amount.value, "1500.00");
    assert.equal(charges[0].status, "succeeded");
  });

  it("2. login: a page without a session redirects to the form; a wrong secret is refused; the operator secret opens the console", async () => {
    assert.ok(world.hasConsole, "this chargeonce has no console (`serve --operator-secret` is unknown)");
    const unauth = await fetch(`${world.operatorUrl}/console/api/overview`);
    assert.equal(unauth.status, 401, "the console's JSON without a session");
    assert.match(unauth.headers.get("content-type") ?? "", /application\/problem\+json/);

    await page.goto(`${world.operatorUrl}/console`);
    assert.equal(new URL(page.url()).pathname, "/console/login", "redirected to the login form");
    const form = page.locator("form[data-testid=login-form]");
    await form.waitFor();
    assert.equal(await form.locator("input[name=secret]").getAttribute("type"), "password");
    await remember();
    await shot("login");

    // A wrong secret (a shop's, even): 401 and the error.
    await form.locator("input[name=secret]").fill(world.shopSecret);
    const refused = page.waitForResponse((r) => r.request().method() === "POST" && new URL(r.url()).pathname === "/console/login");
    await form.locator("button[type=submit]").click();
    assert.equal((await refused).status(), 401);
    await page.locator("[data-testid=login-error]").waitFor();
    await remember();

    // The operator secret.
    await page.locator("form[data-testid=login-form] input[name=secret]").fill(world.operatorSecret);
    await Promise.all([
      page.waitForURL((u) => u.pathname === "/console"),
      page.locator("form[data-testid=login-form] button[type=submit]").click(),
    ]);
    await page.locator("[data-testid=overview]").waitFor();
    const cookies = await page.context().cookies(world.operatorUrl + "/console");
    const session = cookies.find((c) => c.httpOnly);
    assert.ok(session !== undefined, `an HttpOnly session cookie: ${JSON.stringify(cookies.map((c) => c.name))}`);
    assert.equal(session.sameSite, "Strict");
    assert.equal(session.path, "/console");
    assert.ok(!world.server.output().includes(world.operatorSecret), "the operator secret given by flag is never printed or logged");
  });

  it("3. the overview: its charts, refreshed from /console/api/overview", async () => {
    // Listened for before the page loads (its script may poll at once); the
    // catch keeps a failure to load from leaving a dangling rejection.
    const polled = page
      .waitForResponse((r) => new URL(r.url()).pathname === "/console/api/overview", { timeout: 30_000 })
      .catch((/** @type {Error} */ error) => error);
    await open("/console");
    await page.locator("[data-testid=overview]").waitFor();
    for (const name of ["payments", "replays", "conflicts", "mismatches", "pending", "takeovers", "findings"]) {
      assert.equal(await page.locator(`svg[data-testid=chart-${name}]`).count(), 1, `chart ${name}`);
    }
    const res = await polled;
    if (res instanceof Error) throw res;
    assert.equal(res.status(), 200);
    const overview = await res.json();
    assert.equal(typeof overview.series, "object");
    assert.ok(Array.isArray(overview.series.payments), `series.payments: ${JSON.stringify(overview).slice(0, 300)}`);
    assert.equal(typeof overview.counts, "object");
    await shot("overview");
  });

  it("4. payments: filtered by the order, one row, linked to the payment", async () => {
    await open("/console/payments");
    const form = page.locator("form[data-testid=payment-filters]");
    await form.locator("input[name=reference]").fill(ORDER);
    await Promise.all([
      page.waitForURL((u) => u.pathname === "/console/payments" && u.searchParams.get("reference") === ORDER),
      form.evaluate((f) => /** @type {HTMLFormElement} */ (f).requestSubmit()),
    ]);
    await page.locator("nav[data-testid=nav]").waitFor();
    await remember();
    const rows = page.locator("tr[data-testid=payment-row]");
    assert.equal(await rows.count(), 1, "one payment for the order, after five requests");
    await shot("payments");
    await Promise.all([
      page.waitForURL((u) => u.pathname === `/console/payments/${paymentId}`),
      rows.first().locator("a[data-testid=payment-link]").click(),
    ]);
    await page.locator("[data-testid=payment-id]").waitFor();
  });

  it("5. the payment: one charge, the lost answer, the resumed retry, the repeats, the expired key's reuse", async () => {
    await remember();
    assert.equal((await page.locator("[data-testid=payment-id]").innerText()).trim(), paymentId);
    assert.equal((await page.locator("[data-testid=payment-status]").innerText()).trim(), "succeeded");
    assert.match(await page.locator("[data-testid=payment-amount]").innerText(), /1500\.00\s*RUB/);
    assert.equal((await page.locator("[data-testid=payment-reference]").innerText()).trim(), ORDER);
    const pairs = await page.locator("[data-testid=metadata] tbody tr").evaluateAll((rows) =>
      rows.map((r) => Array.from(r.querySelectorAll("td"), (td) => td.textContent)),
    );
    assert.deepEqual(pairs, Object.entries(METADATA).sort(([a], [b]) => a.localeCompare(b)), "the metadata, as sent, as text");
    assert.equal(await page.locator("[data-testid=metadata] b").count(), 0, "markup in a value is escaped");

    const entries = await timeline();
    const of = (/** @type {(e: (typeof entries)[number]) => boolean} */ p) => entries.filter(p);
    const story = entries.map((e) => `${e.type}${e.call ? `/${e.call}` : ""}${e.outcome ? `:${e.outcome}` : ""}${e.status ? `=${e.status}` : ""}`).join(", ");
    assert.equal(entries[0]?.type, "claimed", `oldest first, the claim on top: ${story}`);
    const charges = of((e) => e.type === "acquirer_call" && e.call === "charge");
    assert.equal(charges.filter((e) => e.outcome === "succeeded").length, 1, `exactly one charge succeeded: ${story}`);
    assert.equal(charges.filter((e) => e.outcome === "unknown").length, 1, `exactly one charge's answer was lost: ${story}`);
    assert.equal(charges.length, 2, `two charge calls with one acquirer key, no other: ${story}`);
    assert.ok(of((e) => e.type === "answered" && e.status === "201").length >= 1, `an answered 201: ${story}`);
    assert.ok(of((e) => e.type === "taken_over").length >= 1, `the retry took the key over: ${story}`);
    assert.ok(of((e) => e.type === "linked").length >= 1, `the expired key's reuse is linked: ${story}`);
    const unknownAt = entries.findIndex((e) => e.type === "acquirer_call" && e.outcome === "unknown");
    const takenAt = entries.findIndex((e) => e.type === "taken_over");
    const succeededAt = entries.findIndex((e) => e.type === "acquirer_call" && e.outcome === "succeeded");
    assert.ok(unknownAt < takenAt && takenAt < succeededAt, `lost answer, then take-over, then the charge's answer: ${story}`);
    assert.equal(of((e) => e.type === "settled").length, 1, `settled once: ${story}`);

    // The double click and the changed amount, on the key's summary. The
    // replay was answered from the instance's cache: its count lands within
    // about a second (bounded reloads).
    await until(async () => {
      const replays = await repeatCount(KEY, "replays");
      const mismatches = await repeatCount(KEY, "mismatches");
      if (replays >= 1 && mismatches === 1) return true;
      await page.reload();
      await page.locator("[data-testid=payment-id]").waitFor();
      // Not yet: said as the last error if the bound is reached.
      throw new Error(`the summary shows ${replays} replays, ${mismatches} mismatches`);
    }, "the key's summary shows >=1 replay and 1 mismatch", { ms: 15_000, every: 300 });
    await remember();

    const ground = await chargesOf(ORDER);
    assert.equal(ground.length, 1, "the ledger still holds one charge for the order");
  });

  it("6. a merchant event resent from the payment page", async () => {
    // The event was written with the payment; wait for the relay's first
    // delivery to the receiver before resending it.
    const events = await api(world, "GET", "/v1/events");
    assert.equal(events.status, 200, events.text);
    const event = events.json.data.find((/** @type {any} */ e) => e.payment_id === paymentId && e.type === "payment.succeeded");
    assert.ok(event !== undefined, `an event about ${paymentId}: ${events.text.slice(0, 500)}`);
    await world.receiver.waitFor((d) => d.some((x) => x.eventId === event.id), `the first delivery of ${event.id}`);

    await open(`/console/payments/${paymentId}`);
    const row = page.locator(`tr[data-testid=event-row][data-event-id="${event.id}"]`);
    await row.waitFor();
    const flash = await submitAction(row.locator("button[data-testid=resend-event]"));
    assert.ok(flash.length > 0, "a flash message after the resend");
    await world.receiver.waitFor((d) => d.filter((x) => x.eventId === event.id).length >= 2, `the resent delivery of ${event.id}`);
    await until(async () => {
      if ((await timeline()).some((e) => e.type === "event_resent")) return true;
      await page.reload();
      await page.locator("[data-testid=payment-id]").waitFor();
      return undefined;
    }, "an event_resent entry on the timeline", { ms: 15_000, every: 300 });
    await remember();
    await shot("payment");
  });

  it("7. keys: a key looked up", async () => {
    // The incident's key lives only a few seconds (the short TTL that let it
    // expire above): a fresh payment's key is looked up instead, while it lives.
    const fresh = `${KEY}-lookup`;
    const paid = await api(world, "POST", "/v1/payments", {
      key: fresh,
      body: { amount: AMOUNT, reference: `${ORDER}-lookup`, payment_method: { token: "tok_ok" } },
    });
    assert.equal(paid.status, 201, paid.text);
    await open(`/console/keys?shop=${encodeURIComponent(world.shop)}&key=${encodeURIComponent(fresh)}`);
    const info = page.locator("[data-testid=key-info]");
    await info.waitFor();
    assert.match(await info.innerText(), new RegExp(fresh));
    await shot("keys");
  });

  it("8. a reconciliation finding (a second charge planted at the acquirer), resolved with a note", async () => {
    const other = await api(world, "POST", "/v1/payments", {
      key: `${OTHER}-pay`,
      body: { amount: AMOUNT, reference: OTHER, payment_method: { token: "tok_ok" } },
    });
    assert.equal(other.status, 201, other.text);
    otherPaymentId = other.json.id;
    await plantCharge(world, {
      acquirer_key: `second-key-for-${OTHER}`,
      shop_id: world.shop,
      payment_id: otherPaymentId,
      reference: OTHER,
      amount: AMOUNT,
    });
    const report = await run(["reconcile", "--database-url", world.db, "--sim-ledger", world.ledger, "--json"]);
    assert.equal(report.code, 2, `reconcile exits 2 on findings:\n${report.stdout}\n${report.stderr}`);
    const kinds = JSON.parse(report.stdout).findings.map((/** @type {any} */ f) => f.kind);
    assert.deepEqual(kinds, ["duplicate_charge"], report.stdout);

    await open("/console/findings");
    const row = page.locator("tr[data-testid=finding-row]", { hasText: OTHER });
    await until(async () => {
      if ((await row.count()) === 1) return true;
      await page.reload();
      await page.locator("nav[data-testid=nav]").waitFor();
      return undefined;
    }, `an open finding about ${OTHER}`, { ms: 20_000, every: 300 });
    await remember();
    assert.match(await row.innerText(), /duplicate_charge|duplicate/i);
    const id = await row.getAttribute("data-finding-id");
    assert.ok(id !== null && id !== "", "the row names its finding");
    await row.locator("textarea[name=note]").fill(NOTE);
    await submitAction(row.locator("button[data-testid=resolve-finding]"));

    await open("/console/findings?state=resolved");
    const resolved = page.locator(`tr[data-testid=finding-row][data-finding-id="${id}"]`);
    await resolved.waitFor();
    const resolution = resolved.locator("[data-testid=finding-resolution]");
    await resolution.waitFor();
    assert.match(await resolution.innerText(), /drill/, "the resolution shows the note");
    await open("/console/findings?state=open");
    assert.equal(await page.locator(`tr[data-testid=finding-row][data-finding-id="${id}"]`).count(), 0, "no longer open");
    await open("/console/findings?state=all");
    await shot("findings");
  });

  it("9. the finding on its payment's timeline", async () => {
    await open(`/console/payments/${otherPaymentId}`);
    const types = (await timeline()).map((e) => e.type);
    assert.ok(types.includes("finding"), `a finding entry: ${types.join(", ")}`);
    assert.ok(types.includes("finding_resolved"), `a finding_resolved entry: ${types.join(", ")}`);
  });

  it("10. events and shops", async () => {
    await open(`/console/events?shop=${encodeURIComponent(world.shop)}`);
    assert.ok((await page.locator("tr[data-testid=event-row]").count()) >= 2, "the shop's events: both payments");
    assert.ok((await page.locator("button[data-testid=resend-event]").count()) >= 1, "with resend buttons");
    await shot("events");

    await open("/console/shops");
    const row = page.locator("tr[data-testid=shop-row]", { hasText: world.shop });
    assert.equal(await row.count(), 1);
    assert.match(await row.innerText(), new RegExp(world.receiver.url.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")));
    await shot("shops");
  });

  it("10b. a pending payment canceled: asked in the page and on a confirmation, then recorded", async () => {
    const key = `${ORDER}-cancel-me-pay`;
    const pending = await api(world, "POST", "/v1/payments", {
      key,
      body: { amount: AMOUNT, reference: `${ORDER}-cancel-me`, payment_method: { token: "tok_timeout" } },
    });
    assert.equal(pending.status, 202, `the answer was lost: pending (${pending.text})`);
    const id = pending.json.id;
    await open(`/console/payments/${id}`);
    const form = page.locator("form[data-testid=cancel-form]");
    assert.equal(await form.count(), 1, "a pending payment has the cancel form");
    assert.equal(await page.locator("form[data-testid=refund-form]").count(), 0, "and no refund form");
    // The button's confirm() (accepted above), then the confirmation page.
    await Promise.all([page.waitForURL((u) => u.pathname === `/console/payments/${id}/cancel`), form.locator("button[type=submit]").click()]);
    const confirm = page.locator("button[data-testid=confirm-cancel]");
    await confirm.waitFor();
    await remember();
    await shot("confirm-cancel");
    const flash = await submitAction(confirm);
    assert.match(flash, /cancel recorded|canceled|charge was found/, flash);
    const types = (await timeline()).map((e) => e.type);
    assert.ok(types.includes("cancel_requested"), `a cancel_requested entry: ${types.join(", ")}`);
  });

  it("10d. an authorization captured in two shipments and refunded from the console; another voided", async () => {
    const made = await api(world, "POST", "/v1/payments", {
      key: `${ORDER}-ship-authorize`,
      body: { amount: AMOUNT, reference: `${ORDER}-ship`, payment_method: { token: "tok_ok" }, capture_method: "manual" },
    });
    assert.equal(made.status, 201, made.text);
    assert.equal(made.json.status, "authorized");
    const id = made.json.id;
    await open(`/console/payments/${id}`);
    assert.equal(await page.locator("[data-testid=authorization-status]").innerText(), "authorized");
    assert.equal(await page.locator("form[data-testid=refund-form]").count(), 0, "nothing captured: nothing to refund");
    /** @param {string} value @param {boolean} last */
    const captureFromPage = async (value, last) => {
      const form = page.locator("form[data-testid=capture-form]");
      await form.locator("input[name=amount]").fill(value);
      if (last) await form.locator("input[name=final]").check();
      await Promise.all([page.waitForURL((u) => u.pathname === `/console/payments/${id}/capture`), form.locator("button[type=submit]").click()]);
      const confirm = page.locator("button[data-testid=confirm-capture]");
      await confirm.waitFor();
      await remember();
      return submitAction(confirm);
    };
    const first = await captureFromPage("1000.00", false);
    assert.match(first, /captured 1000\.00/, first);
    assert.equal(await page.locator("[data-testid=authorization-status]").innerText(), "partially_captured");
    await shot("capture");
    const second = await captureFromPage("500.00", true);
    assert.match(second, /captured 500\.00/, second);
    assert.equal(await page.locator("[data-testid=authorization-status]").innerText(), "succeeded");
    assert.equal(await page.locator("tr[data-testid=capture-row]").count(), 2);
    assert.match(await page.locator("[data-testid=amount-captured]").innerText(), /1500\.00/);
    assert.equal(await page.locator("form[data-testid=void-form]").count(), 0, "used up: nothing to void");
    const refund = await api(world, "POST", `/v1/payments/${id}/refunds`, {
      key: `${ORDER}-ship-refund-1`,
      body: { amount: { value: "200.00", currency: "RUB" } },
    });
    assert.equal(refund.status, 201, refund.text);
    await open(`/console/payments/${id}`);
    const types = (await timeline()).map((e) => e.type);
    for (const type of ["capture_reserved", "capture_ended", "refund_reserved"]) {
      assert.ok(types.includes(type), `a ${type} entry: ${types.join(", ")}`);
    }
    await shot("authorization");

    const other = await api(world, "POST", "/v1/payments", {
      key: `${ORDER}-void-authorize`,
      body: { amount: AMOUNT, reference: `${ORDER}-void`, payment_method: { token: "tok_ok" }, capture_method: "manual" },
    });
    assert.equal(other.status, 201, other.text);
    await open(`/console/payments/${other.json.id}`);
    const form = page.locator("form[data-testid=void-form]");
    await Promise.all([page.waitForURL((u) => u.pathname === `/console/payments/${other.json.id}/void`), form.locator("button[type=submit]").click()]);
    const confirm = page.locator("button[data-testid=confirm-void]");
    await confirm.waitFor();
    await remember();
    const flash = await submitAction(confirm);
    assert.match(flash, /released.*voided/, flash);
    assert.equal(await page.locator("[data-testid=authorization-status]").innerText(), "voided");
    const shown = await api(world, "GET", `/v1/payments/${other.json.id}`);
    assert.equal(shown.json.status, "voided", "the API agrees with the console");
  });

  it("10c. the public port keeps the operator's side off it; /docs renders under its CSP; / names the API", async () => {
    for (const path of ["/console", "/console/login", "/metrics", "/sim/ledger"]) {
      const res = await fetch(`${world.url}${path}`, { redirect: "manual" });
      assert.equal(res.status, 404, `GET ${path} on the public port -> ${res.status}`);
      const res2 = await fetch(`${world.operatorUrl}${path}`, { redirect: "manual" });
      assert.ok([200, 303].includes(res2.status), `GET ${path} on the operator port -> ${res2.status}`);
    }
    const docs = await fetch(`${world.url}/docs/`);
    assert.equal(docs.status, 200);
    assert.match(docs.headers.get("content-security-policy") ?? "", /frame-ancestors 'none'/);
    assert.equal(docs.headers.get("x-frame-options"), "DENY");
    /** @type {string[]} */
    const violations = [];
    const onConsole = (/** @type {import("playwright-core").ConsoleMessage} */ m) => {
      if (m.type() === "error") violations.push(m.text());
    };
    page.on("console", onConsole);
    await page.goto(`${world.url}/docs/`);
    await page.locator(".swagger-ui .information-container .title").first().waitFor();
    await page.locator(".opblock").first().waitFor();
    page.off("console", onConsole);
    assert.deepEqual(violations, [], "Swagger UI runs under its CSP without a refusal");
    await shot("docs");
    const home = await page.goto(`${world.url}/`);
    assert.ok(home !== null);
    assert.equal(home.status(), 200);
    assert.match(await page.locator("body").innerText(), /Idempotency-Key/);
    assert.ok(await page.locator("a[href='/docs/']").count() === 1, "the landing page links the docs");
  });

  it("10e. API keys: listed without secrets; a lost one revoked from the console, then refused by the API", async () => {
    const made = await runOk(["shops", "keys", "add", "--shop", world.shop, "--scope", "read-only",
      "--description", "lost laptop", "--database-url", world.db]);
    const id = /key (key_[0-9a-f]{32}) /.exec(made.stdout)?.[1];
    lostSecret = /secret key \(shown once, store it now\): (\S+)/.exec(made.stdout)?.[1] ?? "";
    assert.ok(id !== undefined && lostSecret.startsWith("sk_live_"), made.stdout);
    const asLost = () => fetch(`${world.url}/v1/payments`, {
      headers: { authorization: `Basic ${Buffer.from(`${world.shop}:${lostSecret}`).toString("base64")}` },
    });
    // At once, unless the instance read the shop's keys in the last 100 ms.
    await until(async () => ((await asLost()).status === 200 ? true : undefined), "the new key works", { ms: 2_000 });

    await open("/console/shops");
    await page.locator(`tr[data-testid=shop-row][data-shop-id="${world.shop}"] a[data-testid=shop-api-keys]`).click();
    await page.waitForLoadState("load");
    await remember();
    const rows = page.locator("tr[data-testid=api-key-row]");
    assert.equal(await rows.count(), 2, "the shop's first secret and the new key");
    assert.equal(await rows.first().getAttribute("data-state"), "active");
    const row = page.locator(`tr[data-testid=api-key-row][data-key-id="${id}"]`);
    const text = await row.innerText();
    assert.match(text, /read_only/);
    assert.match(text, /lost laptop/);
    assert.match(text, new RegExp(lostSecret.slice(0, 12)), "its prefix");
    const flash = await submitAction(row.locator("button[data-testid=revoke-api-key]"));
    assert.match(flash, /revoked/, flash);
    assert.equal(await page.locator(`tr[data-testid=api-key-row][data-key-id="${id}"]`).getAttribute("data-state"), "revoked");
    await shot("api-keys");
    // Refused on the instance within its auth cache's TTL (2 s here).
    const refused = /** @type {{code: string}} */ (await until(async () => {
      const res = await asLost();
      return res.status === 401 ? await res.json() : undefined;
    }, "the revoked key refused", { ms: 10_000 }));
    assert.equal(refused.code, "api_key_revoked");
  });

  it("10f. test mode: a test payment of the seed order is another payment, shown only in test mode, marked as test data", async () => {
    const made = await runOk(["shops", "keys", "add", "--shop", world.shop, "--mode", "test", "--scope", "full",
      "--database-url", world.db]);
    testSecret = /secret key \(shown once, store it now\): (\S+)/.exec(made.stdout)?.[1] ?? "";
    assert.ok(testSecret.startsWith("sk_test_"), made.stdout);
    const auth = `Basic ${Buffer.from(`${world.shop}:${testSecret}`).toString("base64")}`;
    // At once, unless the instance read the shop's keys in the last 100 ms.
    await until(async () => ((await fetch(`${world.url}/v1/payments`, { headers: { authorization: auth } })).status === 200 ? true : undefined),
      "the test key works", { ms: 2_000 });
    // The seed incident's key and order, with the test key: a payment of its own.
    const res = await fetch(`${world.url}/v1/payments`, {
      method: "POST",
      headers: {
        authorization: auth,
        "idempotency-key": KEY,
        "content-type": "application/json",
      },
      body: JSON.stringify({ ...BODY, payment_method: { token: "tok_ok" } }),
    });
    const tested = /** @type {{id: string, livemode: boolean}} */ (await res.json());
    assert.equal(res.status, 201, JSON.stringify(tested));
    assert.notEqual(tested.id, paymentId);
    assert.equal(tested.livemode, false);
    assert.equal((await chargesOf(ORDER)).length, 1, "the live ledger still holds the one charge");

    // Live mode (the default) lists the live payment only, unmarked.
    await open(`/console/payments?reference=${ORDER}`);
    let rows = page.locator("tr[data-testid=payment-row]");
    assert.equal(await rows.count(), 1);
    assert.equal(await rows.first().getAttribute("data-payment-id"), paymentId);
    assert.equal(await page.locator("[data-testid=test-badge]").count(), 0);
    assert.equal(await page.locator("[data-testid=test-data-banner]").count(), 0);

    // The mode filter: the test payment alone, marked.
    const form = page.locator("form[data-testid=payment-filters]");
    await form.locator("select[data-testid=mode-filter]").selectOption("test");
    await Promise.all([
      page.waitForURL((u) => u.pathname === "/console/payments" && u.searchParams.get("mode") === "test"),
      form.evaluate((f) => /** @type {HTMLFormElement} */ (f).requestSubmit()),
    ]);
    await page.locator("nav[data-testid=nav]").waitFor();
    await remember();
    rows = page.locator("tr[data-testid=payment-row]");
    assert.equal(await rows.count(), 1);
    assert.equal(await rows.first().getAttribute("data-payment-id"), tested.id);
    assert.equal(await rows.first().locator("[data-testid=test-badge]").count(), 1);
    await page.locator("[data-testid=test-data-banner]").waitFor();
    await shot("payments-test-mode");
    await Promise.all([
      page.waitForURL((u) => u.pathname === `/console/payments/${tested.id}`),
      rows.first().locator("a[data-testid=payment-link]").click(),
    ]);
    await page.locator("[data-testid=payment-id]").waitFor();
    await remember();
    await page.locator("[data-testid=test-data-banner]").waitFor();
    assert.equal(await page.locator("dl.facts [data-testid=test-badge]").count(), 1);
  });

  it("11. no page showed a secret, ran into a script error, or fetched anything from elsewhere", () => {
    assert.ok(seenHtml.size >= 8, `pages seen: ${[...seenHtml.keys()].join(" ")}`);
    for (const [url, html] of seenHtml) {
      for (const [what, value] of [
        ["the operator secret", world.operatorSecret],
        ["the shop's secret", world.shopSecret],
        ["the webhook signing secret", world.webhookSecret],
        ["the secret of the key made in 10e", lostSecret],
        ["the secret of the test key made in 10f", testSecret],
      ]) {
        assert.ok(!html.includes(/** @type {string} */ (value)), `${url} shows ${what}`);
      }
    }
    assert.deepEqual(pageErrors, []);
    assert.deepEqual(foreignRequests, []);
  });
});
