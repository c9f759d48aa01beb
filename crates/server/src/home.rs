//! `GET /`: what a newcomer's browser (or `curl`) finds at the root of the
//! public listener: the API's name, where its reference is, and where the
//! operator console is (not here). HTML for a client that asks for it
//! (`Accept: text/html`), JSON otherwise.
//!
//! The console's address is named only when it is a loopback address (so
//! it means "on this host" and tells a stranger nothing); otherwise the page
//! says the console is on the operator listener without its address.

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::json;

use crate::AppState;
use crate::openapi::{DOCS_PATH, SPEC_PATH};

/// The Content-Security-Policy of the landing page: no script at all.
const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; \
     base-uri 'none'; form-action 'none'";

/// The landing page's route.
pub fn router() -> Router<AppState> {
    Router::new().route("/", get(home))
}

/// Where the console is, in words a visitor may read.
fn console_note(state: &AppState) -> String {
    match state.operator_listen {
        Some(addr) if addr.ip().is_loopback() => format!(
            "The operator console is not served here: it is at http://{addr}/console, \
             reachable from this host only."
        ),
        Some(_) => "The operator console is not served here: it is on the operator \
                    listener (serve --operator-listen), whose address is not published."
            .to_owned(),
        None => "The operator console is not served here (its listener is off).".to_owned(),
    }
}

fn wants_html(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| accept.contains("text/html"))
}

/// `GET /`: the landing page.
async fn home(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let console = console_note(&state);
    if !wants_html(&headers) {
        return axum::Json(json!({
            "name": "chargeonce",
            "description": "an idempotent payment API: send each payment with an \
                            Idempotency-Key; every repeat gets the first answer",
            "api": "/v1",
            "docs": DOCS_PATH,
            "openapi": SPEC_PATH,
            "console": console,
        }))
        .into_response();
    }
    let body = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>chargeonce</title>\
         <style>body{{font-family:system-ui,sans-serif;max-width:40rem;margin:3rem auto;\
         line-height:1.5;padding:0 1rem}}code{{background:#f3f3f3;padding:0 .2rem}}</style>\
         </head><body><h1>chargeonce</h1>\
         <p>An idempotent payment API: send each payment with an \
         <code>Idempotency-Key</code>; every repeat of it gets the first answer, \
         and a person is charged once.</p>\
         <ul><li><a href=\"{DOCS_PATH}/\">The API reference</a> (Swagger UI)</li>\
         <li><a href=\"{SPEC_PATH}\">The OpenAPI document</a></li></ul>\
         <p>{console}</p></body></html>\n"
    );
    let mut response = ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}
