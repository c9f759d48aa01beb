//! A test merchant: a receiver of chargeonce's merchant events on a free
//! port of `127.0.0.1`, answering each delivery from a script and logging
//! every one. Dropping it stops the server.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use chargeonce_core::webhook::SIGNATURE_HEADER;

/// How the test merchant answers one delivery.
#[derive(Debug, Clone)]
pub enum Reply {
    /// Answers at once with this status.
    Status(u16),
    /// Never answers in time (a minute): the sender's request times out or
    /// the sender is killed meanwhile.
    Hang,
    /// Answers `307 Temporary Redirect` to this location.
    Redirect(String),
}

/// One delivery as the merchant received it.
#[derive(Debug, Clone)]
pub struct Received {
    /// The `Chargeonce-Event-Id` header.
    pub event_id: String,
    /// The `Chargeonce-Event-Type` header.
    pub event_type: String,
    /// The signature header.
    pub signature: String,
    /// The body, byte for byte.
    pub body: Vec<u8>,
}

#[derive(Default)]
struct Script {
    replies: VecDeque<Reply>,
    /// The status once the script is over (200 unless set).
    then: Option<u16>,
    received: Vec<Received>,
}

type Shared = Arc<Mutex<Script>>;

/// A running test merchant; see the [module docs](self).
pub struct TestMerchant {
    /// Where it takes deliveries: `http://127.0.0.1:PORT/hooks`.
    pub url: String,
    script: Shared,
    server: tokio::task::JoinHandle<()>,
}

impl TestMerchant {
    /// A merchant answering the first deliveries from `script`, then 200.
    ///
    /// # Panics
    /// When no port can be bound.
    #[allow(clippy::unwrap_used)]
    pub async fn start(script: Vec<Reply>) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hooks", listener.local_addr().unwrap());
        let shared: Shared = Arc::new(Mutex::new(Script {
            replies: script.into(),
            ..Script::default()
        }));
        let app = axum::Router::new()
            .route("/hooks", axum::routing::post(hook))
            .with_state(shared.clone());
        let server = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self {
            url,
            script: shared,
            server,
        }
    }

    /// Every delivery so far, in order.
    pub fn received(&self) -> Vec<Received> {
        lock(&self.script).received.clone()
    }

    /// Drops what is left of the script: every later delivery gets `status`.
    pub fn answer_from_now_on(&self, status: u16) {
        let mut script = lock(&self.script);
        script.replies.clear();
        script.then = Some(status);
    }
}

impl Drop for TestMerchant {
    fn drop(&mut self) {
        self.server.abort();
    }
}

fn lock(script: &Shared) -> std::sync::MutexGuard<'_, Script> {
    script.lock().unwrap_or_else(PoisonError::into_inner)
}

async fn hook(
    State(script): State<Shared>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> axum::response::Response {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let reply = {
        let mut script = lock(&script);
        script.received.push(Received {
            event_id: header("chargeonce-event-id"),
            event_type: header("chargeonce-event-type"),
            signature: header(SIGNATURE_HEADER),
            body: body.to_vec(),
        });
        let then = script.then.unwrap_or(200);
        script.replies.pop_front().unwrap_or(Reply::Status(then))
    };
    match reply {
        Reply::Status(code) => StatusCode::from_u16(code)
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
            .into_response(),
        Reply::Hang => {
            tokio::time::sleep(Duration::from_secs(60)).await;
            StatusCode::OK.into_response()
        }
        Reply::Redirect(location) => axum::response::Redirect::temporary(&location).into_response(),
    }
}
