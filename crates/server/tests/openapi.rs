//! The OpenAPI document: the committed copy is the generated one, the served
//! one is the generated one, every documented operation is routed and every
//! route documented, what every operation shares is there, and `/docs`
//! serves Swagger UI from inside the binary.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::collections::BTreeSet;
use std::path::PathBuf;

use chargeonce_server::openapi;
use common::{Backend, TestService};
use serde_json::Value;

const REGENERATE: &str = "regenerate it with `cargo run -p chargeonce -- openapi > docs/openapi.json` \
     (or `UPDATE_OPENAPI=1 cargo nextest run -p chargeonce-server --test openapi`) and commit it";

fn committed_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/openapi.json")
}

fn generated() -> Value {
    serde_json::from_str(&openapi::document_json()).unwrap()
}

/// Every (path, method) of a document.
fn operations(spec: &Value) -> BTreeSet<(String, String)> {
    let mut all = BTreeSet::new();
    for (path, item) in spec["paths"].as_object().unwrap() {
        for method in [
            "get", "put", "post", "delete", "patch", "head", "options", "trace",
        ] {
            if item.get(method).is_some() {
                all.insert((path.clone(), method.to_owned()));
            }
        }
    }
    all
}

#[test]
fn the_committed_copy_is_the_generated_document() {
    let generated = openapi::document_json();
    if std::env::var_os("UPDATE_OPENAPI").is_some() {
        std::fs::write(committed_path(), &generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(committed_path()).unwrap_or_default();
    if committed != generated {
        let line = committed
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .map_or_else(
                || committed.lines().count().min(generated.lines().count()) + 1,
                |i| i + 1,
            );
        panic!(
            "docs/openapi.json differs from the document the code generates (first at line \
             {line}): {REGENERATE}"
        );
    }
}

#[test]
fn the_document_is_openapi_3_1_with_its_parts() {
    let spec = generated();
    assert_eq!(spec["openapi"], "3.1.0");
    let schemes = &spec["components"]["securitySchemes"];
    assert_eq!(schemes[openapi::SHOP_BASIC]["scheme"], "basic");
    assert_eq!(
        schemes[openapi::ACQUIRER_SIGNATURE]["name"],
        "chargeonce-signature"
    );
    for name in [
        "Problem",
        "ProblemCode",
        "Payment",
        "Refund",
        "Event",
        "Amount",
        "CreatePayment",
        "CreateRefund",
    ] {
        assert!(
            spec["components"]["schemas"][name].is_object(),
            "schema {name}"
        );
    }
    for (path, method) in operations(&spec) {
        let operation = &spec["paths"][&path][&method];
        let what = format!("{method} {path}");
        assert!(operation["operationId"].is_string(), "{what}");
        assert!(operation["tags"][0].is_string(), "{what}");
        let parameters = operation["parameters"].as_array().unwrap();
        let request_id = parameters
            .iter()
            .find(|p| p["name"] == "Request-Id")
            .unwrap_or_else(|| panic!("{what}: Request-Id parameter"));
        assert_eq!(request_id["required"], false, "{what}");
        let authenticated = operation["security"].to_string().contains("shop_basic");
        let responses = operation["responses"].as_object().unwrap();
        for (status, response) in responses {
            assert!(
                response["headers"]["Request-Id"].is_object(),
                "{what} {status}: Request-Id header"
            );
            if status.starts_with('4') || status.starts_with('5') {
                assert_eq!(
                    response["content"]["application/problem+json"]["schema"]["$ref"],
                    "#/components/schemas/Problem",
                    "{what} {status}"
                );
                let description = response["description"].as_str().unwrap();
                assert!(
                    description.starts_with('`'),
                    "{what} {status}: the description names its codes: {description}"
                );
            }
            if ["409", "429", "503"].contains(&status.as_str()) {
                assert!(
                    response["headers"]["Retry-After"].is_object(),
                    "{what} {status}"
                );
            }
        }
        for status in ["500", "503"] {
            assert!(responses.contains_key(status), "{what} {status}");
        }
        if authenticated {
            for status in ["401", "429"] {
                assert!(responses.contains_key(status), "{what} {status}");
            }
        }
        let is_webhook = path == "/v1/webhooks/acquirer";
        if method == "post" && !is_webhook {
            assert!(authenticated, "{what}");
            let key = parameters
                .iter()
                .find(|p| p["name"] == "Idempotency-Key")
                .unwrap_or_else(|| panic!("{what}: Idempotency-Key"));
            assert_eq!(key["in"], "header");
            assert_eq!(key["required"], true, "{what}");
            assert_eq!(key["schema"]["pattern"], openapi::IDEMPOTENCY_KEY_PATTERN);
            assert_eq!(
                key["schema"]["maxLength"], 512,
                "the quoted form of a 255-character key"
            );
        }
        if is_webhook {
            assert!(
                operation["security"]
                    .to_string()
                    .contains("acquirer_signature")
            );
        }
    }
    // The headers of an idempotent answer.
    let created = &spec["paths"]["/v1/payments"]["post"]["responses"]["201"]["headers"];
    for header in ["Location", "Idempotent-Replayed", "Preference-Applied"] {
        assert!(created[header].is_object(), "{header}");
    }
    let pending = &spec["paths"]["/v1/payments"]["post"]["responses"]["202"]["headers"];
    assert!(pending["Retry-After"].is_object() && pending["Location"].is_object());
    let prefer = spec["paths"]["/v1/payments"]["post"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["name"] == "Prefer" && p["required"] == false);
    assert!(prefer, "Prefer on POST /v1/payments");
}

/// What a request to a route that is not routed gets: the router's own
/// fallbacks (404 "no such route", 405).
async fn is_fallback(answer: reqwest::Response) -> bool {
    let status = answer.status().as_u16();
    let body: Value = answer.json().await.unwrap_or(Value::Null);
    status == 405 || (status == 404 && body["detail"] == "no such route")
}

#[tokio::test(flavor = "multi_thread")]
async fn every_documented_operation_is_routed_and_the_served_document_is_the_generated_one() {
    let s = TestService::start(Backend::Sqlite).await;
    let http = reqwest::Client::new();

    let served = http.get(s.url(openapi::SPEC_PATH)).send().await.unwrap();
    assert_eq!(served.status(), 200);
    assert_eq!(served.headers()["content-type"], "application/json");
    assert!(served.headers().contains_key("request-id"));
    let served = served.text().await.unwrap();
    assert_eq!(served, openapi::document_json(), "served = generated");

    let spec = generated();
    let documented = operations(&spec);
    for (path, method) in &documented {
        let concrete = path.replace("{id}", "x").replace("{key}", "x");
        let method = reqwest::Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
        let answer = http
            .request(method.clone(), s.url(&concrete))
            .send()
            .await
            .unwrap();
        assert!(
            !is_fallback(answer).await,
            "{method} {path} is documented but not routed"
        );
    }
    // And the router's fallbacks are what the probe takes them to be.
    let unknown = http.get(s.url("/v1/nothing-here")).send().await.unwrap();
    assert!(is_fallback(unknown).await);
    let wrong = http.delete(s.url("/v1/payments")).send().await.unwrap();
    assert!(is_fallback(wrong).await);
}

/// The routes this test knows: each must be in the document (a route that
/// goes missing from it fails here; a new one only needs adding here).
const KNOWN: &[(&str, &str)] = &[
    ("/v1/payments", "get"),
    ("/v1/payments", "post"),
    ("/v1/payments/{id}", "get"),
    ("/v1/payments/{id}/history", "get"),
    ("/v1/payments/{id}/refunds", "get"),
    ("/v1/payments/{id}/refunds", "post"),
    ("/v1/refunds", "get"),
    ("/v1/refunds/{id}", "get"),
    ("/v1/idempotency-keys/{key}", "get"),
    ("/v1/events", "get"),
    ("/v1/events/{id}", "get"),
    ("/v1/events/{id}/resend", "post"),
    ("/v1/webhooks/acquirer", "post"),
    ("/healthz", "get"),
    ("/readyz", "get"),
];

#[test]
fn every_route_is_documented() {
    let documented = operations(&generated());
    for (path, method) in KNOWN {
        assert!(
            documented.contains(&((*path).to_owned(), (*method).to_owned())),
            "{method} {path} is routed but not in the document"
        );
    }
    // A route added with a plain `.route()` would be served without being
    // documented: the router's routes all come from `routes!` in
    // `api_routes`, and only the document and the docs page are mounted
    // otherwise (in the openapi module, through `.merge`).
    let lib = include_str!("../src/lib.rs");
    let plain: Vec<&str> = lib
        .lines()
        .map(str::trim)
        .filter(|line| !line.starts_with("//"))
        .filter(|line| line.contains(".route(") || line.contains(".nest("))
        .collect();
    assert!(
        plain.is_empty(),
        "crates/server/src/lib.rs mounts routes outside `routes!` (add them with \
         `.routes(routes!(handler))` and a `#[utoipa::path]` on the handler): {plain:?}"
    );
    let module = include_str!("../src/openapi/mod.rs");
    let mounted: Vec<&str> = module
        .lines()
        .map(str::trim)
        .filter(|line| !line.starts_with("//"))
        .filter(|line| line.contains(".route("))
        .collect();
    assert_eq!(
        mounted.len(),
        1,
        "the openapi module mounts only SPEC_PATH itself: {mounted:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn docs_are_served_from_inside_the_binary() {
    let s = TestService::start(Backend::Sqlite).await;
    let http = reqwest::Client::new();
    // `/docs` redirects to `/docs/`, the page.
    let page = http.get(s.url(openapi::DOCS_PATH)).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.url().path().ends_with("/docs/"), "{}", page.url());
    assert!(
        page.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    let html = page.text().await.unwrap();
    assert!(html.contains("swagger-ui"), "{html}");
    assert!(
        !html.contains("https://") && !html.contains("http://") && !html.contains("//cdn"),
        "no external URL in the page: {html}"
    );
    // Its scripts and styles are relative, served by the binary.
    for asset in [
        "swagger-ui.css",
        "swagger-ui-bundle.js",
        "swagger-ui-standalone-preset.js",
    ] {
        assert!(html.contains(asset), "{asset} in the page");
        let answer = http
            .get(s.url(&format!("/docs/{asset}")))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 200, "{asset}");
        assert!(!answer.bytes().await.unwrap().is_empty(), "{asset}");
    }
    // The initializer points at the served document, and at nothing outside.
    let init = http
        .get(s.url("/docs/swagger-initializer.js"))
        .send()
        .await
        .unwrap();
    assert_eq!(init.status(), 200);
    let init = init.text().await.unwrap();
    assert!(init.contains(openapi::SPEC_PATH), "{init}");
    assert!(!init.contains("https://"), "{init}");
    assert!(init.contains("\"validatorUrl\": \"none\"") || init.contains("validatorUrl"));
}
