//! A peer for chargeonce's `bench/peers`: a do-nothing `POST /v1/payments`
//! (201 and a small JSON body with an id from a counter), served by axum 0.8
//!
//! - `idempotent`: behind axum-idempotent 0.6 in Direct Key Mode on the
//!   `Idempotency-Key` header, with ruts' in-memory `MokaStore` sessions, as
//!   its README puts the layers (`CookieManagerLayer`, `SessionLayer`,
//!   `IdempotentLayer`). axum-idempotent caches only for a request that carries
//!   a session, and never makes one: `POST /session` makes one (it writes a
//!   session field, as the crate's own tests do) and answers its cookie;
//! - `plain`: the same handler with no middleware, the ceiling.
//!
//! ```text
//! peer-axum idempotent|plain 127.0.0.1:PORT
//! ```
//!
//! `GET /healthz` answers 200 in both.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum_idempotent::{IdempotentLayer, IdempotentOptions};
use ruts::store::Ttl;
use ruts::store::moka::MokaStore;
use ruts::{CookieOptions, Session, SessionLayer};
use tower_cookies::CookieManagerLayer;

/// How long a session and a cached answer live: longer than any run.
const TTL_SECS: i64 = 3600;

async fn pay(State(counter): State<Arc<AtomicU64>>) -> impl IntoResponse {
    let n = counter.fetch_add(1, Ordering::Relaxed) + 1;
    (
        StatusCode::CREATED,
        [(header::CONTENT_TYPE, "application/json")],
        format!(r#"{{"id":"pay_{n}","object":"payment","status":"succeeded"}}"#),
    )
}

async fn session(session: Session<MokaStore>) -> impl IntoResponse {
    let Ok(ttl) = Ttl::new(TTL_SECS) else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "bad ttl");
    };
    match session.set("client", &"bench".to_owned(), ttl, None).await {
        Ok(_) => (StatusCode::OK, "session"),
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "no session"),
    }
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(mode), Some(listen)) = (args.next(), args.next()) else {
        eprintln!("usage: peer-axum idempotent|plain HOST:PORT");
        std::process::exit(2);
    };
    let counter = Arc::new(AtomicU64::new(0));
    let payments = Router::new()
        .route("/v1/payments", post(pay))
        .with_state(counter);
    let app = match mode.as_str() {
        "plain" => payments,
        "idempotent" => {
            let store = Arc::new(MokaStore::builder().build());
            let options = IdempotentOptions::default()
                .use_idempotency_key_header(Some("Idempotency-Key"), true)
                .expire_after(TTL_SECS);
            let cookies = CookieOptions::build()
                .name("session")
                .max_age(TTL_SECS as u64)
                .path("/");
            payments
                .layer(IdempotentLayer::<MokaStore>::new(options))
                .route("/session", post(session))
                .layer(SessionLayer::new(store).with_cookie_options(cookies))
                .layer(CookieManagerLayer::new())
        }
        other => {
            eprintln!("unknown mode {other}: want idempotent or plain");
            std::process::exit(2);
        }
    };
    let app = app.route("/healthz", get(|| async { "ok" }));
    let listener = match tokio::net::TcpListener::bind(&listen).await {
        Ok(listener) => listener,
        Err(error) => {
            eprintln!("binding {listen}: {error}");
            std::process::exit(1);
        }
    };
    eprintln!("axum peer ({mode}) listening on http://{listen}");
    if let Err(error) = axum::serve(listener, app).await {
        eprintln!("serving: {error}");
        std::process::exit(1);
    }
}
