//! No request forgery through webhook URLs: the destinations a shop's URL
//! may lead to are judged at registration and again at every connection,
//! over real HTTP on both stores. A name that resolved to a public address
//! when it was registered and to loopback later is not delivered to; an IP
//! literal stored before the check existed is not either; a redirect is not
//! followed; and the shop reads why without an address in it.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chargeonce_core::ShopId;
use chargeonce_core::events::{EventId, WebhookEndpoint};
use chargeonce_core::webhook::WebhookSecret;
use chargeonce_testkit::{Reply, TestMerchant, on_both_stores};
use chargeonce_workers::egress::{Egress, EgressPolicy, Lookup, UrlRefusal};
use chargeonce_workers::relay::{Relay, RelayConfig};
use common::{Backend, TestService, body, send};
use futures::future::BoxFuture;
use serde_json::Value;

/// A name server whose answer the test changes: DNS rebinding.
#[derive(Default)]
struct Rebinding {
    answer: Mutex<Vec<IpAddr>>,
}

impl Rebinding {
    fn answer(&self, ip: &str) {
        *self.answer.lock().unwrap() = vec![ip.parse().unwrap()];
    }
}

impl Lookup for Rebinding {
    fn lookup<'a>(&'a self, host: &'a str) -> BoxFuture<'a, std::io::Result<Vec<IpAddr>>> {
        let found = match host {
            "hooks.shop.example" => self.answer.lock().unwrap().clone(),
            _ => Vec::new(),
        };
        Box::pin(async move { Ok(found) })
    }
}

fn config() -> RelayConfig {
    RelayConfig {
        interval: Duration::from_millis(20),
        request_timeout: Duration::from_secs(5),
        backoff_base: Duration::from_secs(60),
        ..RelayConfig::default()
    }
}

async fn set_webhook(s: &TestService, url: &str) {
    let endpoint = WebhookEndpoint {
        url: url.to_owned(),
        secret: WebhookSecret::new("whsec_egress_test"),
    };
    let shop = ShopId::new(common::SHOP).unwrap();
    assert!(s.store.set_webhook(&shop, Some(&endpoint)).await.unwrap());
}

/// Pays once; the payment's event is due at once.
async fn pay(s: &TestService) {
    let answer = send(s.pay("egress-pay", &body("egress-1", "10.00", "tok_ok"))).await;
    assert_eq!(answer.status, 201, "{:?}", answer.json());
}

/// The shop's only event, as the API shows it.
async fn only_event(s: &TestService) -> Value {
    let events = send(s.get("/v1/events")).await.json();
    assert_eq!(events["data"].as_array().unwrap().len(), 1, "{events}");
    events["data"][0].clone()
}

/// The port of a test merchant's URL (`http://127.0.0.1:PORT/hooks`).
fn port_of(merchant: &TestMerchant) -> u16 {
    reqwest::Url::parse(&merchant.url).unwrap().port().unwrap()
}

#[tokio::test]
async fn the_issue_s_urls_are_refused_at_registration() {
    let egress = Egress::new(EgressPolicy::strict().allow_http(true));
    for url in [
        "http://127.0.0.1:5432/",
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/",
        "http://localhost:8080/hooks",
        "http://[::1]/",
        "http://[::ffff:127.0.0.1]/",
        "http://0.0.0.0/",
        "http://no-such-host.invalid/",
    ] {
        assert_eq!(
            egress.check_url(url).await,
            Err(UrlRefusal::NotPublic),
            "{url}"
        );
    }
    // A public literal needs no lookup and passes.
    assert!(
        egress
            .check_url("https://93.184.216.34/hooks")
            .await
            .is_ok()
    );
    // https only by default.
    let strict = Egress::new(EgressPolicy::strict());
    assert_eq!(
        strict.check_url("http://93.184.216.34/").await,
        Err(UrlRefusal::Scheme)
    );
    for url in [
        "ftp://93.184.216.34/",
        "not a url",
        "https:///x",
        "file:///etc/passwd",
    ] {
        assert!(strict.check_url(url).await.is_err(), "{url}");
    }
    // An allowed network lets loopback through (tests, internal receivers).
    let local = Egress::new(EgressPolicy::loopback());
    assert!(local.check_url("http://127.0.0.1:5432/").await.is_ok());
    assert_eq!(
        local.check_url("http://10.0.0.1/").await,
        Err(UrlRefusal::NotPublic)
    );
}

/// A name with a public and an internal address is refused: the client
/// could connect to either.
#[tokio::test]
async fn a_name_with_one_internal_address_among_public_ones_is_refused() {
    struct Mixed;
    impl Lookup for Mixed {
        fn lookup<'a>(&'a self, _: &'a str) -> BoxFuture<'a, std::io::Result<Vec<IpAddr>>> {
            Box::pin(async {
                Ok(vec![
                    "93.184.216.34".parse().unwrap(),
                    "10.1.2.3".parse().unwrap(),
                ])
            })
        }
    }
    let egress = Egress::with_lookup(EgressPolicy::strict(), Arc::new(Mixed));
    assert_eq!(
        egress.check_url("https://hooks.shop.example/").await,
        Err(UrlRefusal::NotPublic)
    );
}

async fn a_name_rebound_to_loopback_after_registration_is_not_delivered_to(backend: Backend) {
    let s = TestService::start(backend).await;
    let merchant = TestMerchant::start(Vec::new()).await;
    let dns = Arc::new(Rebinding::default());
    let policy = EgressPolicy::strict().allow_http(true);
    let url = format!("http://hooks.shop.example:{}/hooks", port_of(&merchant));

    // Registration: the name is public then.
    dns.answer("93.184.216.34");
    let egress = Egress::with_lookup(policy.clone(), dns.clone());
    assert!(egress.check_url(&url).await.is_ok());
    set_webhook(&s, &url).await;
    pay(&s).await;

    // Delivery: the name now leads to the service's own loopback.
    dns.answer("127.0.0.1");
    let relay = Relay::new(s.store.clone(), config(), egress).unwrap();
    let pass = relay.run_once().await.unwrap();
    assert_eq!((pass.claimed, pass.delivered), (1, 0));
    assert!(merchant.received().is_empty(), "delivered to loopback");
    let event = only_event(&s).await;
    assert_eq!(event["delivery"]["attempts"], 1, "{event}");
    assert_eq!(
        event["delivery"]["last_error"], "the destination is not a public address",
        "{event}"
    );
    assert!(!event.to_string().contains("127.0.0.1"), "{event}");

    // The same name, with loopback allowed by the operator, reaches the
    // merchant through the checked address: the refusal above was the
    // guard's, not a name that led nowhere.
    let allowed = Egress::with_lookup(EgressPolicy::loopback(), dns.clone());
    let shop = ShopId::new(common::SHOP).unwrap();
    let id = EventId::parse(event["id"].as_str().unwrap()).unwrap();
    assert!(
        s.store
            .resend_event(&shop, &id, None)
            .await
            .unwrap()
            .is_some()
    );
    let relay = Relay::new(s.store.clone(), config(), allowed).unwrap();
    let pass = relay.run_once().await.unwrap();
    assert_eq!((pass.claimed, pass.delivered), (1, 1));
    assert_eq!(merchant.received().len(), 1);
}

async fn an_ip_literal_stored_before_the_guard_is_not_delivered_to(backend: Backend) {
    let s = TestService::start(backend).await;
    let merchant = TestMerchant::start(Vec::new()).await;
    // A URL the guard would refuse, written straight to the store (as an
    // older release or an operator's SQL could have).
    set_webhook(&s, &merchant.url).await;
    pay(&s).await;
    let relay = Relay::new(
        s.store.clone(),
        config(),
        Egress::new(EgressPolicy::strict().allow_http(true)),
    )
    .unwrap();
    let pass = relay.run_once().await.unwrap();
    assert_eq!((pass.claimed, pass.delivered), (1, 0));
    assert!(merchant.received().is_empty());
    let event = only_event(&s).await;
    assert_eq!(
        event["delivery"]["last_error"],
        "the destination is not a public address"
    );
}

async fn a_redirect_is_not_followed(backend: Backend) {
    let s = TestService::start(backend).await;
    let elsewhere = TestMerchant::start(Vec::new()).await;
    let merchant = TestMerchant::start(vec![Reply::Redirect(elsewhere.url.clone())]).await;
    set_webhook(&s, &merchant.url).await;
    pay(&s).await;
    let relay = Relay::new(
        s.store.clone(),
        config(),
        Egress::new(EgressPolicy::loopback()),
    )
    .unwrap();
    let pass = relay.run_once().await.unwrap();
    assert_eq!((pass.claimed, pass.delivered), (1, 0));
    assert_eq!(merchant.received().len(), 1);
    assert!(elsewhere.received().is_empty(), "the redirect was followed");
    let event = only_event(&s).await;
    assert_eq!(event["delivery"]["last_status"], 307, "{event}");
    assert_eq!(
        event["delivery"]["last_error"],
        "HTTP 307 Temporary Redirect"
    );
}

async fn a_refused_connection_tells_the_shop_no_address(backend: Backend) {
    let s = TestService::start(backend).await;
    // A port nothing listens on (bound, then closed).
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    set_webhook(&s, &format!("http://127.0.0.1:{port}/hooks")).await;
    pay(&s).await;
    let relay = Relay::new(
        s.store.clone(),
        config(),
        Egress::new(EgressPolicy::loopback()),
    )
    .unwrap();
    relay.run_once().await.unwrap();
    let event = only_event(&s).await;
    assert_eq!(
        event["delivery"]["last_error"], "could not connect to the endpoint",
        "{event}"
    );
}

on_both_stores!(
    a_name_rebound_to_loopback_after_registration_is_not_delivered_to,
    an_ip_literal_stored_before_the_guard_is_not_delivered_to,
    a_redirect_is_not_followed,
    a_refused_connection_tells_the_shop_no_address,
);
