//! The operator console over real HTTP, on both stores: the login (303 to
//! it without a session, 401 for a bad secret, a strict session cookie for
//! the good one, 429 past the login limit), the security headers, the pages and their
//! `data-testid` markers, CSRF, no secret on any page, and the actions
//! (resend an event, refund with a confirmation step) doing what the API
//! would.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::time::Duration;

use chargeonce_console::{ConsoleSettings, LoginLimits};
use chargeonce_core::events::{EventId, WebhookEndpoint};
use chargeonce_core::webhook::WebhookSecret;
use chargeonce_core::{ShopId, ShopSecret};
use chargeonce_testkit::{TestMerchant, client_from, on_both_stores};
use chargeonce_workers::egress::{Egress, EgressPolicy};
use chargeonce_workers::relay::{Relay, RelayConfig};
use common::{Backend, OTHER_SECRET, SECRET, SHOP, TestService, WEBHOOK_SECRET, body, send};
use serde_json::Value;

const OPERATOR_SECRET: &str = "op_test_console_0123456789";
const HOOK_SECRET: &str = "whsec_console_merchant_a";

/// Every secret a page must never show.
const SECRETS: &[&str] = &[
    SECRET,
    OTHER_SECRET,
    OPERATOR_SECRET,
    WEBHOOK_SECRET,
    HOOK_SECRET,
];

/// A service whose operator secret is [`OPERATOR_SECRET`] (in the store,
/// and given to the instance for a store that keeps none).
async fn service(backend: Backend) -> TestService {
    let hash = ShopSecret::new(OPERATOR_SECRET).unwrap().hash();
    let s = TestService::builder(backend)
        .console(move |c| ConsoleSettings {
            operator_secret: Some(hash),
            ..c
        })
        .start()
        .await;
    s.store
        .set_operator_secret(&ShopSecret::new(OPERATOR_SECRET).unwrap().hash())
        .await
        .unwrap();
    s
}

/// A urlencoded form body (reqwest's `form` is not built here).
fn form_body(pairs: &[(&str, &str)]) -> String {
    let encode = |v: &str| {
        v.bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                    char::from(b).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect::<String>()
    };
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// An HTTP client that does not follow redirects.
fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// A logged-in operator.
struct Console {
    base: String,
    http: reqwest::Client,
    cookie: String,
    csrf: String,
}

struct Page {
    status: u16,
    headers: reqwest::header::HeaderMap,
    text: String,
}

impl Page {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

async fn page_of(response: reqwest::Response) -> Page {
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.text().await.unwrap();
    Page {
        status,
        headers,
        text,
    }
}

/// The value of the first `name="csrf"` field of a page.
fn csrf_of(html: &str) -> String {
    let marker = "name=\"csrf\" value=\"";
    let start = html.find(marker).expect("a csrf field") + marker.len();
    html[start..start + html[start..].find('"').unwrap()].to_owned()
}

/// The value of the named hidden field in the form that posts to `action`.
fn field_in_form(html: &str, action: &str, name: &str) -> String {
    let form = &html[html.find(&format!("action=\"{action}\"")).expect(action)..];
    let form = &form[..form.find("</form>").unwrap()];
    let marker = format!("name=\"{name}\" value=\"");
    let start = form.find(&marker).expect(name) + marker.len();
    form[start..start + form[start..].find('"').unwrap()].to_owned()
}

fn assert_console_headers(page: &Page, what: &str) {
    assert_eq!(page.header("cache-control"), Some("no-store"), "{what}");
    assert_eq!(page.header("x-frame-options"), Some("DENY"), "{what}");
    let csp = page.header("content-security-policy").unwrap_or_default();
    assert!(
        csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"),
        "{what}: {csp}"
    );
}

fn assert_no_secret(page: &Page, what: &str) {
    for secret in SECRETS {
        assert!(
            !page.text.contains(secret),
            "{what} shows the secret {secret}"
        );
    }
}

impl Console {
    async fn login(s: &TestService) -> Self {
        let http = client();
        let answer = login_from(s, &http, OPERATOR_SECRET).await;
        assert_eq!(answer.status, 303);
        assert_eq!(answer.header("location"), Some("/console"));
        let set = answer.header("set-cookie").unwrap().to_owned();
        let cookie = set.split(';').next().unwrap().to_owned();
        let mut console = Self {
            base: s.operator_base.clone(),
            http,
            cookie,
            csrf: String::new(),
        };
        let overview = console.get("/console").await;
        assert_eq!(overview.status, 200, "{}", overview.text);
        console.csrf = csrf_of(&overview.text);
        console
    }

    async fn get(&self, path: &str) -> Page {
        page_of(
            self.http
                .get(format!("{}{path}", self.base))
                .header("cookie", &self.cookie)
                .send()
                .await
                .unwrap(),
        )
        .await
    }

    /// A page that must render: 200, the nav, the console's headers, no secret.
    async fn page(&self, path: &str) -> Page {
        let page = self.get(path).await;
        assert_eq!(page.status, 200, "{path}: {}", page.text);
        assert!(
            page.header("content-type")
                .unwrap_or_default()
                .starts_with("text/html"),
            "{path}"
        );
        assert!(page.text.contains("data-testid=\"nav\""), "{path}");
        assert_console_headers(&page, path);
        assert_no_secret(&page, path);
        page
    }

    async fn post(&self, path: &str, form: &[(&str, &str)]) -> Page {
        page_of(
            self.http
                .post(format!("{}{path}", self.base))
                .header("cookie", &self.cookie)
                .header("content-type", "application/x-www-form-urlencoded")
                .body(form_body(form))
                .send()
                .await
                .unwrap(),
        )
        .await
    }
}

async fn pay(s: &TestService, reference: &str, token: &str) -> Value {
    let answer = send(s.pay(
        &format!("{reference}-pay"),
        &body(reference, "1500.00", token),
    ))
    .await;
    match answer.status {
        201 => answer.json(),
        402 => answer.json()["payment"].clone(),
        status => panic!("{status}: {}", String::from_utf8_lossy(&answer.bytes)),
    }
}

async fn a_session_is_needed_and_made_only_with_the_operator_secret(backend: Backend) {
    let s = service(backend).await;
    let http = client();
    // No session: pages go to the login, the JSON is 401.
    for path in [
        "/console",
        "/console/payments",
        "/console/findings",
        "/console/shops",
    ] {
        let page = page_of(http.get(s.operator_url(path)).send().await.unwrap()).await;
        assert_eq!(page.status, 303, "{path}");
        assert_eq!(page.header("location"), Some("/console/login"), "{path}");
        assert_console_headers(&page, path);
    }
    let api = send(http.get(s.operator_url("/console/api/overview"))).await;
    api.assert_problem(401, "unauthorized");
    // A stale cookie is no session.
    let stale = page_of(
        http.get(s.operator_url("/console"))
            .header("cookie", format!("chargeonce_console={}", "0".repeat(64)))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(stale.status, 303);

    let form = page_of(
        http.get(s.operator_url("/console/login"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(form.status, 200);
    assert!(form.text.contains("data-testid=\"login-form\""));
    assert!(form.text.contains("name=\"secret\""));
    assert!(form.text.contains("type=\"password\""));
    assert_console_headers(&form, "login");

    // A shop's secret is not the operator's, nor is a guess.
    for wrong in [SECRET, "guess", ""] {
        let refused = page_of(
            http.post(s.operator_url("/console/login"))
                .header("content-type", "application/x-www-form-urlencoded")
                .body(form_body(&[("secret", wrong)]))
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(refused.status, 401, "{wrong}");
        assert!(refused.text.contains("data-testid=\"login-error\""));
        assert!(refused.text.contains("data-testid=\"login-form\""));
        assert!(refused.header("set-cookie").is_none());
        assert_no_secret(&refused, "the refused login");
    }

    let answer = http
        .post(s.operator_url("/console/login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form_body(&[("secret", OPERATOR_SECRET)]))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 303);
    let cookie = answer.headers()["set-cookie"].to_str().unwrap();
    assert!(cookie.starts_with("chargeonce_console="), "{cookie}");
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/console"] {
        assert!(cookie.contains(attribute), "{cookie}");
    }
    assert!(
        !cookie.contains("Secure"),
        "a loopback operator listener: plain HTTP from this host works: {cookie}"
    );
    let id = cookie
        .split(';')
        .next()
        .unwrap()
        .trim_start_matches("chargeonce_console=");
    assert_eq!(id.len(), 64, "256 random bits, hex");

    let console = Console::login(&s).await;
    let overview = console.get("/console/api/overview").await;
    assert_eq!(overview.status, 200);
    let json: Value = serde_json::from_str(&overview.text).unwrap();
    for name in [
        "payments",
        "replays",
        "conflicts",
        "mismatches",
        "takeovers",
    ] {
        assert!(json["series"][name].is_array(), "{json}");
    }
    assert!(json["counts"]["pending_payments"].is_u64(), "{json}");
    assert_console_headers(&overview, "api/overview");

    // Logging out ends the session.
    let out = console
        .post("/console/logout", &[("csrf", &console.csrf)])
        .await;
    assert_eq!(out.status, 303);
    assert_eq!(console.get("/console").await.status, 303);
}

async fn a_form_without_the_sessions_csrf_token_is_refused(backend: Backend) {
    let s = service(backend).await;
    let console = Console::login(&s).await;
    let other = Console::login(&s).await;
    assert_ne!(console.csrf, other.csrf, "a token per session");
    for form in [
        vec![],
        vec![("csrf", "")],
        vec![("csrf", other.csrf.as_str())],
    ] {
        for path in [
            "/console/logout",
            "/console/findings/1/resolve",
            "/console/events/evt_0123456789abcdef0123456789abcdef/resend",
            "/console/payments/pay_0123456789abcdef0123456789abcdef/refund",
        ] {
            let refused = console.post(path, &form).await;
            assert_eq!(refused.status, 403, "{path} {form:?}: {}", refused.text);
            assert_console_headers(&refused, path);
        }
    }
    // Still logged in: the refused log-out did nothing.
    assert_eq!(console.get("/console").await.status, 200);
}

async fn the_pages_render_their_markers_and_no_secret(backend: Backend) {
    let s = service(backend).await;
    let paid = pay(&s, "order-1", "tok_ok").await;
    pay(&s, "order-2", "tok_declined").await;
    let console = Console::login(&s).await;

    let overview = console.page("/console").await;
    assert!(overview.text.contains("data-testid=\"overview\""));
    for name in [
        "payments",
        "replays",
        "conflicts",
        "mismatches",
        "pending",
        "takeovers",
        "findings",
    ] {
        assert!(
            overview
                .text
                .contains(&format!("data-testid=\"chart-{name}\"")),
            "chart {name}"
        );
    }
    assert!(overview.text.contains("/console/assets/console.js"));
    assert!(!overview.text.contains("<script>"), "no inline script");
    for link in [
        "/console/payments",
        "/console/keys",
        "/console/findings",
        "/console/events",
        "/console/shops",
    ] {
        assert!(
            overview.text.contains(&format!("href=\"{link}\"")),
            "{link}"
        );
    }

    let payments = console.page("/console/payments").await;
    assert!(payments.text.contains("data-testid=\"payment-filters\""));
    for name in [
        "shop",
        "status",
        "reference",
        "created_gte",
        "created_lt",
        "starting_after",
        "ending_before",
    ] {
        assert!(
            payments.text.contains(&format!("name=\"{name}\"")),
            "{name}"
        );
    }

    let keys = console
        .page(&format!("/console/keys?shop={SHOP}&key=order-1-pay"))
        .await;
    assert!(
        keys.text.contains("data-testid=\"key-info\""),
        "{}",
        keys.text
    );
    assert!(keys.text.contains(paid["id"].as_str().unwrap()));
    assert!(keys.text.contains("data-testid=\"replays\""));
    let unknown = console
        .page(&format!("/console/keys?shop={SHOP}&key=nope"))
        .await;
    assert!(!unknown.text.contains("data-testid=\"key-info\""));

    for state in ["open", "resolved", "all"] {
        console
            .page(&format!("/console/findings?state={state}"))
            .await;
    }
    console.page("/console/events").await;
    console.page(&format!("/console/events?shop={SHOP}")).await;
    console.page("/console/shops").await;

    // The assets are the binary's own.
    let js = console.get("/console/assets/console.js").await;
    assert_eq!(js.status, 200);
    assert!(js.text.contains("/console/api/overview"));
    assert!(!js.text.contains("http://") && !js.text.contains("https://"));
    let css = console.get("/console/assets/console.css").await;
    assert_eq!(css.status, 200);

    // An unknown payment is a 404 page, not a problem document.
    let missing = console
        .get("/console/payments/pay_0123456789abcdef0123456789abcdef")
        .await;
    assert_eq!(missing.status, 404);
    assert_no_secret(&missing, "404");
}

/// Needs the stores' operations and history roles (the lead's merge of the
/// store work): the payments list, the payment page and its timeline.
async fn a_payment_shows_its_story_oldest_first(backend: Backend) {
    let s = service(backend).await;
    let paid = pay(&s, "order-1", "tok_ok").await;
    let id = paid["id"].as_str().unwrap();
    // A replay of the same key.
    let replay = send(s.pay("order-1-pay", &body("order-1", "1500.00", "tok_ok"))).await;
    assert!(replay.replayed());
    pay(&s, "order-2", "tok_declined").await;
    let console = Console::login(&s).await;

    let list = console.page("/console/payments").await;
    assert_eq!(list.text.matches("data-testid=\"payment-row\"").count(), 2);
    assert!(list.text.contains(&format!(
        "data-testid=\"payment-link\" href=\"/console/payments/{id}\""
    )));
    let declined = console.page("/console/payments?status=declined").await;
    assert_eq!(
        declined.text.matches("data-testid=\"payment-row\"").count(),
        1
    );
    assert!(!declined.text.contains(id));
    let of_shop = console
        .page(&format!("/console/payments?shop={}", common::OTHER_SHOP))
        .await;
    assert_eq!(
        of_shop.text.matches("data-testid=\"payment-row\"").count(),
        0
    );

    let page = console.page(&format!("/console/payments/{id}")).await;
    let text = &page.text;
    assert!(text.contains(&format!("data-testid=\"payment-id\">{id}<")));
    assert!(text.contains("data-testid=\"payment-amount\">1500.00 RUB<"));
    assert!(text.contains("data-testid=\"payment-reference\">order-1<"));
    assert!(text.contains(">succeeded<"));
    assert!(text.contains("data-testid=\"timeline\""));
    let order: Vec<usize> = [
        "data-type=\"claimed\"",
        "data-type=\"acquirer_call\" data-outcome=\"succeeded\" data-call=\"charge\"",
        "data-type=\"answered\" data-status=\"201\"",
    ]
    .iter()
    .map(|marker| {
        text.find(marker)
            .unwrap_or_else(|| panic!("{marker}: {text}"))
    })
    .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "oldest first");
    assert!(text.contains("data-type=\"settled\""));
    assert!(text.contains("Settled succeeded by the request"));
    assert!(text.contains("data-testid=\"key-repeats\" data-key=\"order-1-pay\""));
    assert!(text.contains("data-testid=\"refund-form\""));
    // No card token on the page.
    assert!(!text.contains("tok_ok"));
}

/// Needs the stores' operations role (the lead's merge of the store work).
async fn a_console_refund_asks_first_and_agrees_with_the_api(backend: Backend) {
    let s = service(backend).await;
    let paid = pay(&s, "order-1", "tok_ok").await;
    let id = paid["id"].as_str().unwrap();
    let console = Console::login(&s).await;
    let page = console.page(&format!("/console/payments/{id}")).await;
    let action = format!("/console/payments/{id}/refund");
    let key = field_in_form(&page.text, &action, "key");
    assert!(key.starts_with(&format!("console-refund-{id}-")), "{key}");
    assert!(page.text.contains("data-confirm="), "a confirm() in JS too");
    assert!(
        !page.text.contains("data-testid=\"cancel-form\""),
        "a succeeded payment has no cancel form"
    );

    // Without confirm=yes: a confirmation page, nothing refunded.
    let ask = console
        .post(
            &action,
            &[("csrf", &console.csrf), ("key", &key), ("amount", "500.00")],
        )
        .await;
    assert_eq!(ask.status, 200, "{}", ask.text);
    assert!(ask.text.contains("data-testid=\"confirm-refund\""));
    assert!(ask.text.contains("500.00 RUB"));
    let listed = send(s.get(&format!("/v1/payments/{id}/refunds"))).await;
    assert_eq!(listed.json()["data"].as_array().unwrap().len(), 0);

    let form = [
        ("csrf", console.csrf.as_str()),
        ("key", key.as_str()),
        ("amount", "500.00"),
        ("confirm", "yes"),
    ];
    let done = console.post(&action, &form).await;
    assert_eq!(done.status, 303, "{}", done.text);
    assert_eq!(
        done.header("location"),
        Some(action.trim_end_matches("/refund"))
    );
    let after = console.page(&format!("/console/payments/{id}")).await;
    assert!(after.text.contains("data-testid=\"flash\""));
    assert_eq!(after.text.matches("data-testid=\"refund-row\"").count(), 1);
    // A double click: refunded once.
    assert_eq!(console.post(&action, &form).await.status, 303);
    let listed = send(s.get(&format!("/v1/payments/{id}/refunds"))).await;
    assert_eq!(listed.json()["data"].as_array().unwrap().len(), 1);

    // The shop's API request with the same key and body is a replay of it.
    let api = send(
        s.http
            .post(s.url(&format!("/v1/payments/{id}/refunds")))
            .basic_auth(SHOP, Some(SECRET))
            .header("idempotency-key", &key)
            .json(&serde_json::json!({"amount": {"value": "500.00", "currency": "RUB"}})),
    )
    .await;
    assert_eq!(api.status, 201, "{}", String::from_utf8_lossy(&api.bytes));
    assert!(api.replayed());
    let paid_now = send(s.get(&format!("/v1/payments/{id}"))).await.json();
    assert_eq!(paid_now["amount_refunded"]["value"], "500.00");
}

/// Needs the stores' operations role (the lead's merge of the store work).
async fn a_console_resend_makes_an_event_due_again_once(backend: Backend) {
    let s = service(backend).await;
    let merchant = TestMerchant::start(vec![]).await;
    let shop = ShopId::new(SHOP).unwrap();
    let endpoint = WebhookEndpoint {
        url: merchant.url.clone(),
        secret: WebhookSecret::new(HOOK_SECRET),
    };
    assert!(s.store.set_webhook(&shop, Some(&endpoint)).await.unwrap());
    let paid = pay(&s, "order-1", "tok_ok").await;
    let id = paid["id"].as_str().unwrap().to_owned();

    // Delivered once by a relay.
    let config = RelayConfig {
        interval: Duration::from_millis(20),
        ..RelayConfig::default()
    };
    let relay = Relay::new(
        s.store.clone(),
        config,
        Egress::new(EgressPolicy::loopback()),
    )
    .unwrap()
    .spawn();
    let events = send(s.get("/v1/events")).await.json();
    let event_id = events["data"][0]["id"].as_str().unwrap().to_owned();
    let event = EventId::parse(&event_id).unwrap();
    let mut delivered = false;
    for _ in 0..250 {
        let e = s.store.event(&shop, &event).await.unwrap().unwrap();
        if e.delivery().delivered_at_ms.is_some() {
            delivered = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    relay.abort();
    assert!(delivered);

    let console = Console::login(&s).await;
    let page = console.page(&format!("/console/payments/{id}")).await;
    assert!(
        page.text.contains(&format!(
            "data-testid=\"event-row\" data-event-id=\"{event_id}\""
        )),
        "{}",
        page.text
    );
    let events_page = console.page("/console/events").await;
    assert!(events_page.text.contains(&event_id));
    assert!(events_page.text.contains("data-testid=\"resend-event\""));
    // Its delivery to the shop's endpoint, by endpoint; the endpoint on the
    // shop's endpoints page, without its secret.
    let endpoints = s.store.endpoints(&shop).await.unwrap();
    assert_eq!(endpoints.len(), 1);
    let endpoint_id = endpoints[0].id.to_string();
    assert!(
        events_page.text.contains(&format!(
            "data-testid=\"endpoint-delivery\" data-endpoint-id=\"{endpoint_id}\" data-state=\"delivered\""
        )),
        "{}",
        events_page.text
    );
    let shops = console.page("/console/shops").await;
    assert!(
        shops
            .text
            .contains("data-testid=\"shop-webhook-endpoints\"")
    );
    let listed = console
        .page(&format!("/console/shops/{SHOP}/webhook-endpoints"))
        .await;
    assert!(
        listed.text.contains(&format!(
            "data-testid=\"endpoint-row\" data-endpoint-id=\"{endpoint_id}\" data-state=\"enabled\""
        )),
        "{}",
        listed.text
    );
    assert!(listed.text.contains(&merchant.url));
    assert!(!listed.text.contains(HOOK_SECRET), "no signing secret");
    let unknown = console.get("/console/shops/nobody/webhook-endpoints").await;
    assert_eq!(unknown.status, 404);
    let action = format!("/console/events/{event_id}/resend");
    let key = field_in_form(&page.text, &action, "key");
    assert_eq!(key, format!("resend-{event_id}-1"));
    let back = format!("/console/payments/{id}");
    let form = [
        ("csrf", console.csrf.as_str()),
        ("key", key.as_str()),
        ("back", back.as_str()),
    ];
    let done = console.post(&action, &form).await;
    assert_eq!(done.status, 303, "{}", done.text);
    assert_eq!(done.header("location"), Some(back.as_str()));
    let e = s.store.event(&shop, &event).await.unwrap().unwrap();
    assert_eq!(e.delivery().delivered_at_ms, None, "due again");
    let flashed = console.page(&back).await;
    assert!(flashed.text.contains("data-testid=\"flash\""));
    assert!(flashed.text.contains("data-type=\"event_resent\""));

    // The same click again: already resent, nothing more.
    assert_eq!(console.post(&action, &form).await.status, 303);
    let again = console.page(&back).await;
    assert!(again.text.contains("already resent"), "{}", again.text);

    // A resend to one endpoint: its own button, its own key.
    let at = again.text.find("name=\"endpoint\"").unwrap();
    let per_endpoint = &again.text[again.text[..at].rfind("<form").unwrap()..];
    let key = field_in_form(per_endpoint, &action, "key");
    assert_eq!(key, format!("resend-{event_id}-{endpoint_id}-1"));
    let form = [
        ("csrf", console.csrf.as_str()),
        ("key", key.as_str()),
        ("endpoint", endpoint_id.as_str()),
        ("back", back.as_str()),
    ];
    assert_eq!(console.post(&action, &form).await.status, 303);
    let flashed = console.page(&back).await;
    assert!(
        flashed.text.contains("due again now at 1 endpoint"),
        "{}",
        flashed.text
    );
}

/// Past an address's login limit (three a minute here), an attempt from it
/// is answered 429 with `Retry-After` before its secret is checked: even the
/// operator secret gets no session. The shop API is not affected.
async fn logins_past_the_limit_are_refused_before_the_secret_is_checked(backend: Backend) {
    let hash = ShopSecret::new(OPERATOR_SECRET).unwrap().hash();
    let s = TestService::builder(backend)
        .console(move |c| ConsoleSettings {
            session_ttl: Duration::from_secs(3600),
            logins: LoginLimits {
                per_client: 3,
                ..LoginLimits::standard()
            },
            operator_secret: Some(hash),
            ..c
        })
        .start()
        .await;
    let http = client();
    let attempt = |secret: &'static str| {
        http.post(s.operator_url("/console/login"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form_body(&[("secret", secret)]))
    };
    for _ in 0..3 {
        let refused = page_of(attempt("guess").send().await.unwrap()).await;
        assert_eq!(refused.status, 401);
    }
    let limited = page_of(attempt(OPERATOR_SECRET).send().await.unwrap()).await;
    assert_eq!(limited.status, 429, "{}", limited.text);
    let retry_after: u64 = limited.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry_after), "{retry_after}");
    assert!(limited.text.contains("data-testid=\"login-limited\""));
    assert!(limited.text.contains("data-testid=\"login-form\""));
    assert!(limited.header("set-cookie").is_none(), "no session");
    assert_no_secret(&limited, "the limited login");
    let listed = send(s.get("/v1/payments")).await;
    assert_eq!(listed.status, 200);
}

/// A console cancel of a pending payment (its answer lost: `tok_timeout`
/// charged it): a confirmation first, then the cancel through the engine
/// (202 while the settle window runs), the same key twice cancels once, and
/// the payment ends kept and refunded in full; a succeeded payment has no
/// cancel form.
async fn a_console_cancel_asks_first_and_ends_the_payment(backend: Backend) {
    let hash = ShopSecret::new(OPERATOR_SECRET).unwrap().hash();
    let s = TestService::builder(backend)
        .console(move |c| ConsoleSettings {
            operator_secret: Some(hash),
            ..c
        })
        .engine(|config| chargeonce_core::EngineConfig {
            acquirer_timeout: std::time::Duration::from_millis(300),
            settle_window: std::time::Duration::from_millis(1500),
            ..config
        })
        .start()
        .await;
    s.store
        .set_operator_secret(&ShopSecret::new(OPERATOR_SECRET).unwrap().hash())
        .await
        .unwrap();
    let first = send(s.pay("order-c-pay", &body("order-c", "1500.00", "tok_timeout"))).await;
    assert_eq!(first.status, 202, "the answer was lost: pending");
    let id = first.json()["id"].as_str().unwrap().to_owned();
    let console = Console::login(&s).await;
    let page = console.page(&format!("/console/payments/{id}")).await;
    assert!(page.text.contains("data-testid=\"cancel-form\""));
    assert!(!page.text.contains("data-testid=\"refund-form\""));
    let action = format!("/console/payments/{id}/cancel");
    let key = field_in_form(&page.text, &action, "key");
    assert!(key.starts_with(&format!("console-cancel-{id}-")), "{key}");

    // Without confirm=yes: a confirmation page, nothing recorded.
    let ask = console
        .post(&action, &[("csrf", &console.csrf), ("key", &key)])
        .await;
    assert_eq!(ask.status, 200, "{}", ask.text);
    assert!(ask.text.contains("data-testid=\"confirm-cancel\""));
    let history = send(s.get(&format!("/v1/payments/{id}/history")))
        .await
        .json();
    assert!(!history.to_string().contains("cancel_requested"));

    let form = [
        ("csrf", console.csrf.as_str()),
        ("key", key.as_str()),
        ("confirm", "yes"),
    ];
    let done = console.post(&action, &form).await;
    assert_eq!(done.status, 303, "{}", done.text);
    let after = console.page(&format!("/console/payments/{id}")).await;
    assert!(after.text.contains("data-testid=\"flash\""));
    assert!(after.text.contains("cancel recorded"), "{}", after.text);
    // Confirming again (a double click, later) until it ends: one refund.
    let mut status = String::new();
    for _ in 0..40 {
        assert_eq!(console.post(&action, &form).await.status, 303);
        status = send(s.get(&format!("/v1/payments/{id}"))).await.json()["refund_status"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if status == "refunded" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    assert_eq!(status, "refunded", "found and refunded in full");
    let ended = console.page(&format!("/console/payments/{id}")).await;
    assert!(
        ended.text.contains("the charge was found"),
        "{}",
        ended.text
    );
    assert!(!ended.text.contains("data-testid=\"cancel-form\""));
    let listed = send(s.get(&format!("/v1/payments/{id}/refunds"))).await;
    assert_eq!(listed.json()["data"].as_array().unwrap().len(), 1);
    // The shop's API request with the same key is a replay of it.
    let api = send(
        s.http
            .post(s.url(&format!("/v1/payments/{id}/cancel")))
            .basic_auth(SHOP, Some(SECRET))
            .header("idempotency-key", &key)
            .json(&serde_json::json!({})),
    )
    .await;
    assert_eq!(api.status, 200, "{}", String::from_utf8_lossy(&api.bytes));
    assert!(api.replayed());
}

async fn login_from(s: &TestService, http: &reqwest::Client, secret: &str) -> Page {
    let answer = http
        .post(s.operator_url("/console/login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form_body(&[("secret", secret)]))
        .send()
        .await
        .unwrap();
    page_of(answer).await
}

/// 30 wrong logins from one address spend that address's budget only: the
/// operator, from another address, logs in.
async fn a_guesser_cannot_lock_the_operator_out(backend: Backend) {
    let hash = ShopSecret::new(OPERATOR_SECRET).unwrap().hash();
    let s = TestService::builder(backend)
        .console(move |c| ConsoleSettings {
            operator_secret: Some(hash),
            ..c
        })
        .start()
        .await;
    let stranger = client_from("127.0.0.1");
    let guesses = (0..30).map(|_| login_from(&s, &stranger, "not-the-secret-at-all"));
    let answers = futures::future::join_all(guesses).await;
    let limited = answers.iter().filter(|p| p.status == 429).count();
    let refused = answers.iter().filter(|p| p.status == 401).count();
    assert_eq!(
        (refused, limited),
        (20, 10),
        "the default budget (20 a minute) then 429"
    );
    let operator = client_from("127.0.0.2");
    let login = login_from(&s, &operator, OPERATOR_SECRET).await;
    assert_eq!(login.status, 303, "{}", login.text);
    assert!(login.header("set-cookie").is_some(), "a session");
}

/// The global ceiling bounds guessing from many addresses; the operator's
/// trusted network is not counted against it.
async fn the_ceiling_spares_trusted_networks(backend: Backend) {
    let hash = ShopSecret::new(OPERATOR_SECRET).unwrap().hash();
    let s = TestService::builder(backend)
        .console(move |c| ConsoleSettings {
            logins: LoginLimits {
                per_client: 100,
                ceiling: 4,
                trusted: vec!["127.0.0.9/32".parse().unwrap()],
            },
            operator_secret: Some(hash),
            ..c
        })
        .start()
        .await;
    for ip in ["127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6"] {
        let refused = login_from(&s, &client_from(ip), "wrong-wrong-wrong").await;
        assert_eq!(refused.status, 401, "{ip}");
    }
    let over = login_from(&s, &client_from("127.0.0.7"), OPERATOR_SECRET).await;
    assert_eq!(
        over.status, 429,
        "past the ceiling, from an untrusted address"
    );
    let trusted = login_from(&s, &client_from("127.0.0.9"), OPERATOR_SECRET).await;
    assert_eq!(
        trusted.status, 303,
        "the trusted network logs in: {}",
        trusted.text
    );
}

/// The public listener serves none of the operator's side (404 problems),
/// and its landing page names the API (JSON, or HTML for a browser) and
/// where the console is; the operator listener serves the console,
/// `/metrics` and health.
async fn the_public_listener_keeps_the_operators_side_off(backend: Backend) {
    let s = TestService::builder(backend).sim_routes().start().await;
    let http = client();
    for path in [
        "/console",
        "/console/login",
        "/console/assets/console.js",
        "/metrics",
        "/sim/ledger",
    ] {
        let public = page_of(http.get(s.url(path)).send().await.unwrap()).await;
        assert_eq!(public.status, 404, "{path} on the public listener");
        assert!(
            public
                .header("content-type")
                .unwrap()
                .starts_with("application/problem+json")
        );
        let operator = page_of(http.get(s.operator_url(path)).send().await.unwrap()).await;
        assert!(
            [200, 303].contains(&operator.status),
            "{path} on the operator listener: {}",
            operator.status
        );
    }
    for path in ["/healthz", "/readyz"] {
        assert_eq!(
            page_of(http.get(s.url(path)).send().await.unwrap())
                .await
                .status,
            200
        );
        assert_eq!(
            page_of(http.get(s.operator_url(path)).send().await.unwrap())
                .await
                .status,
            200
        );
    }
    for path in ["/v1/payments", "/docs/"] {
        let on_operator = page_of(http.get(s.operator_url(path)).send().await.unwrap()).await;
        assert_eq!(
            on_operator.status, 404,
            "{path} is not on the operator listener"
        );
    }
    let json: Value = http
        .get(s.url("/"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(json["docs"], "/docs");
    assert_eq!(json["openapi"], "/v1/openapi.json");
    assert!(
        json["console"].as_str().unwrap().contains(&s.operator_base),
        "a loopback console is named: {json}"
    );
    let html = page_of(
        http.get(s.url("/"))
            .header("accept", "text/html,application/xhtml+xml")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(html.status, 200);
    assert!(
        html.header("content-type")
            .unwrap()
            .starts_with("text/html")
    );
    assert!(html.text.contains("href=\"/docs/\""), "{}", html.text);
    assert!(
        html.header("content-security-policy")
            .unwrap()
            .contains("default-src 'none'")
    );
    let docs = page_of(http.get(s.url("/docs/")).send().await.unwrap()).await;
    assert!(
        docs.header("content-security-policy")
            .unwrap()
            .contains("frame-ancestors 'none'")
    );
    assert_eq!(docs.header("x-frame-options"), Some("DENY"));
}

/// Off loopback the session cookie is `Secure`, so a browser never sends it
/// in clear.
async fn the_session_cookie_is_secure_off_loopback(backend: Backend) {
    let hash = ShopSecret::new(OPERATOR_SECRET).unwrap().hash();
    let s = TestService::builder(backend)
        .console(move |c| ConsoleSettings {
            secure_cookie: true,
            operator_secret: Some(hash),
            ..c
        })
        .start()
        .await;
    let login = login_from(&s, &client(), OPERATOR_SECRET).await;
    assert_eq!(login.status, 303);
    let cookie = login.header("set-cookie").unwrap();
    assert!(cookie.contains("; Secure"), "{cookie}");
}

on_both_stores!(
    the_public_listener_keeps_the_operators_side_off,
    the_session_cookie_is_secure_off_loopback,
    a_guesser_cannot_lock_the_operator_out,
    the_ceiling_spares_trusted_networks,
    a_console_cancel_asks_first_and_ends_the_payment,
    a_session_is_needed_and_made_only_with_the_operator_secret,
    a_form_without_the_sessions_csrf_token_is_refused,
    the_pages_render_their_markers_and_no_secret,
    a_payment_shows_its_story_oldest_first,
    a_console_refund_asks_first_and_agrees_with_the_api,
    a_console_resend_makes_an_event_due_again_once,
    logins_past_the_limit_are_refused_before_the_secret_is_checked,
);
