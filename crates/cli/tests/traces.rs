//! OpenTelemetry traces (`serve --otlp-endpoint`), exported to a real
//! OTLP/HTTP receiver started by the test (protobuf, decoded with the
//! OpenTelemetry proto types): a payment's tree continues the caller's
//! `traceparent` down to the acquirer, which records the trace id on the
//! charge; a replay and a resumed payment have trees of their own; no
//! attribute carries a key, a secret or a card token; with the endpoint
//! down, requests are answered and the dropped spans are counted.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;
mod net;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use chargeonce_testkit::TestDb;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use prost::Message as _;
use serde_json::Value;

/// A span as received, with the resource's `service.name`.
#[derive(Debug, Clone)]
struct Received {
    service: String,
    span: Span,
}

impl Received {
    fn trace_id(&self) -> String {
        hex(&self.span.trace_id)
    }

    fn span_id(&self) -> String {
        hex(&self.span.span_id)
    }

    fn parent_id(&self) -> String {
        hex(&self.span.parent_span_id)
    }

    fn attribute(&self, key: &str) -> Option<String> {
        self.span
            .attributes
            .iter()
            .find(|kv| kv.key == key)
            .and_then(|kv| kv.value.as_ref())
            .map(text)
    }
}

fn text(value: &AnyValue) -> String {
    match &value.value {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        other => format!("{other:?}"),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The receiver: `POST /v1/traces` with an `ExportTraceServiceRequest`.
#[derive(Clone, Default)]
struct Receiver(Arc<Mutex<Vec<Received>>>);

impl Receiver {
    async fn start(self) -> String {
        async fn export(State(receiver): State<Receiver>, body: Bytes) -> &'static str {
            let request = ExportTraceServiceRequest::decode(body).unwrap();
            let mut spans = receiver.0.lock().unwrap();
            for resource in request.resource_spans {
                let service = resource
                    .resource
                    .iter()
                    .flat_map(|r| r.attributes.iter())
                    .find(|kv| kv.key == "service.name")
                    .and_then(|kv| kv.value.as_ref())
                    .map(text)
                    .unwrap_or_default();
                for scope in resource.scope_spans {
                    for span in scope.spans {
                        spans.push(Received {
                            service: service.clone(),
                            span,
                        });
                    }
                }
            }
            ""
        }
        let app = axum::Router::new()
            .route("/v1/traces", axum::routing::post(export))
            .with_state(self);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        format!("http://{addr}")
    }

    fn of_trace(&self, trace_id: &str) -> Vec<Received> {
        let spans = self.0.lock().unwrap();
        spans
            .iter()
            .filter(|r| r.trace_id() == trace_id)
            .cloned()
            .collect()
    }

    /// The spans of a trace once its request span arrived (spans end and
    /// are exported children first, so the request's is the last).
    async fn trace(&self, trace_id: &str) -> Vec<Received> {
        common::eventually(
            &format!("the request span of trace {trace_id}"),
            Duration::from_secs(15),
            || async {
                let spans = self.of_trace(trace_id);
                spans
                    .iter()
                    .any(|r| r.span.kind == SpanKind::Server as i32)
                    .then_some(spans)
            },
        )
        .await
    }
}

/// A `traceparent` for a new trace: (header, trace id, parent span id).
fn traceparent() -> (String, String, String) {
    let trace = uuid::Uuid::new_v4().simple().to_string();
    let parent = uuid::Uuid::new_v4().simple().to_string()[..16].to_owned();
    (format!("00-{trace}-{parent}-01"), trace, parent)
}

async fn pay(
    service: &net::Proc,
    key: &str,
    reference: &str,
    token: &str,
    traceparent: &str,
) -> reqwest::Response {
    common::client()
        .post(service.url("/v1/payments"))
        .basic_auth(common::SHOP, Some(common::SECRET))
        .header("idempotency-key", key)
        .header("content-type", "application/json")
        .header("traceparent", traceparent)
        .body(common::payment_body(reference, token))
        .send()
        .await
        .unwrap()
}

fn one<'a>(spans: &'a [Received], what: &str, pick: impl Fn(&Received) -> bool) -> &'a Received {
    let found: Vec<&Received> = spans.iter().filter(|r| pick(r)).collect();
    assert_eq!(found.len(), 1, "one {what} in {spans:#?}");
    found[0]
}

fn names(spans: &[Received]) -> Vec<String> {
    spans.iter().map(|r| r.span.name.clone()).collect()
}

/// What no attribute of any span may carry.
fn assert_nothing_secret(spans: &[Received], forbidden: &[&str]) {
    for received in spans {
        for kv in &received.span.attributes {
            let value = kv.value.as_ref().map(text).unwrap_or_default();
            for secret in forbidden {
                assert!(
                    !value.contains(secret),
                    "span {} attribute {} carries {secret:?}: {value}",
                    received.span.name,
                    kv.key
                );
            }
        }
    }
}

async fn charges_of(acquirer: &net::Proc, reference: &str) -> Vec<Value> {
    let url = acquirer.url(&format!(
        "/v1/charges?shop_id={}&reference={reference}",
        common::SHOP
    ));
    let answer = common::get_json(&common::client(), &url).await;
    answer["data"].as_array().cloned().unwrap_or_default()
}

#[tokio::test]
async fn a_payment_a_replay_and_a_resumed_payment_are_traced_to_the_acquirer() {
    let receiver = Receiver::default();
    let endpoint = receiver.clone().start().await;
    let db = TestDb::sqlite();
    common::add_shop(db.url()).await;
    let acquirer = net::acquirer(&db.dir(), "127.0.0.1:0", &[]).await;
    let service = net::service(
        "traced",
        &db,
        &acquirer.base,
        &[
            "--otlp-endpoint",
            &endpoint,
            "--otel-service-name",
            "chargeonce-test",
            // Long enough that the retry below comes first.
            "--completer-idle",
            "3s",
            "--completer-interval",
            "200ms",
        ],
    )
    .await;

    // A payment, continuing the caller's trace.
    let (header, trace, caller_span) = traceparent();
    let answer = pay(&service, "trace-key-1", "order-trace-1", "tok_ok", &header).await;
    assert_eq!(answer.status(), 201);
    let spans = receiver.trace(&trace).await;
    assert!(spans.iter().all(|r| r.service == "chargeonce-test"));
    let request = one(&spans, "request span", |r| {
        r.span.kind == SpanKind::Server as i32
    });
    assert_eq!(request.span.name, "POST /v1/payments");
    assert_eq!(
        request.parent_id(),
        caller_span,
        "continues the caller's span"
    );
    assert_eq!(
        request.attribute("http.route").as_deref(),
        Some("/v1/payments")
    );
    assert_eq!(
        request.attribute("http.response.status_code").as_deref(),
        Some("201")
    );
    assert_eq!(request.attribute("shop_id").as_deref(), Some(common::SHOP));
    assert_eq!(request.attribute("replayed").as_deref(), Some("false"));
    assert!(request.attribute("request_id").is_some());
    assert_eq!(
        request.attribute("trace_id").as_deref(),
        Some(trace.as_str()),
        "the trace id is on the request's span, so on every log line of it"
    );
    let claim = one(&spans, "claim", |r| r.span.name == "store.claim_payment");
    assert_eq!(claim.parent_id(), request.span_id(), "{:?}", names(&spans));
    assert_eq!(claim.attribute("db.system").as_deref(), Some("sqlite"));
    assert!(
        spans
            .iter()
            .filter(|r| r.span.name.starts_with("store."))
            .all(|r| r.parent_id() == request.span_id()),
        "every store span is the request's child: {:?}",
        names(&spans)
    );
    let charge = one(&spans, "acquirer charge", |r| {
        r.span.name == "acquirer charge"
    });
    assert_eq!(charge.span.kind, SpanKind::Client as i32);
    assert_eq!(charge.parent_id(), request.span_id());
    assert_eq!(charge.attribute("outcome").as_deref(), Some("succeeded"));
    assert!(charge.attribute("latency_us").is_some());
    // The acquirer recorded the trace on the charge.
    let charges = charges_of(&acquirer, "order-trace-1").await;
    assert_eq!(charges.len(), 1);
    assert_eq!(charges[0]["trace_id"], trace.as_str());

    // A replay: a trace of its own, no acquirer call.
    let (header, replay_trace, _) = traceparent();
    let answer = pay(&service, "trace-key-1", "order-trace-1", "tok_ok", &header).await;
    assert_eq!(answer.status(), 201);
    assert_eq!(answer.headers()["idempotent-replayed"], "true");
    let replay = receiver.trace(&replay_trace).await;
    let request = one(&replay, "replay's request span", |r| {
        r.span.kind == SpanKind::Server as i32
    });
    assert_eq!(request.attribute("replayed").as_deref(), Some("true"));
    assert!(
        !replay.iter().any(|r| r.span.name.starts_with("acquirer")),
        "a replay calls no acquirer: {:?}",
        names(&replay)
    );

    // A caller that did not sample its trace (flags 00): nothing exported
    // for it, while the sampled request after it is.
    let (_, unsampled, parent) = traceparent();
    let header = format!("00-{unsampled}-{parent}-00");
    let answer = pay(&service, "trace-key-4", "order-trace-4", "tok_ok", &header).await;
    assert_eq!(answer.status(), 201);
    let (header, after, _) = traceparent();
    let answer = pay(&service, "trace-key-4", "order-trace-4", "tok_ok", &header).await;
    assert_eq!(answer.status(), 201);
    receiver.trace(&after).await;
    assert!(
        receiver.of_trace(&unsampled).is_empty(),
        "the caller's sampling decision is kept"
    );

    // A payment whose answer the acquirer loses, then the retry resumes it.
    let (header, lost_trace, _) = traceparent();
    let answer = pay(
        &service,
        "trace-key-2",
        "order-trace-2",
        "tok_timeout",
        &header,
    )
    .await;
    assert_eq!(answer.status(), 202, "{:?}", answer.text().await);
    let lost = receiver.trace(&lost_trace).await;
    let charge = one(&lost, "the lost charge", |r| {
        r.span.name == "acquirer charge"
    });
    assert_eq!(charge.attribute("outcome").as_deref(), Some("unknown"));
    let (header, resumed_trace, _) = traceparent();
    let answer = pay(
        &service,
        "trace-key-2",
        "order-trace-2",
        "tok_timeout",
        &header,
    )
    .await;
    assert_eq!(answer.status(), 201);
    let resumed = receiver.trace(&resumed_trace).await;
    let request = one(&resumed, "the retry's request span", |r| {
        r.span.kind == SpanKind::Server as i32
    });
    assert_eq!(request.attribute("replayed").as_deref(), Some("false"));
    let calls: Vec<&Received> = resumed
        .iter()
        .filter(|r| r.span.name.starts_with("acquirer"))
        .collect();
    assert!(!calls.is_empty(), "{:?}", names(&resumed));
    assert!(calls.iter().all(|r| r.parent_id() == request.span_id()));
    assert!(
        calls
            .iter()
            .any(|r| r.attribute("outcome").as_deref() == Some("succeeded")),
        "{calls:#?}"
    );
    assert!(
        resumed.iter().any(|r| r.span.name == "store.take_over"),
        "{:?}",
        names(&resumed)
    );
    // The charge carries the first request's trace: it was recorded then.
    let charges = charges_of(&acquirer, "order-trace-2").await;
    assert_eq!(charges.len(), 1);
    assert_eq!(charges[0]["trace_id"], lost_trace.as_str());

    // A lost answer nobody retries: the completer resumes it, in a trace of
    // its own.
    let (header, _, _) = traceparent();
    let answer = pay(
        &service,
        "trace-key-3",
        "order-trace-3",
        "tok_timeout",
        &header,
    )
    .await;
    assert_eq!(answer.status(), 202);
    let completed =
        common::eventually("the completer's trace", Duration::from_secs(20), || async {
            let spans = receiver.0.lock().unwrap().clone();
            let root = spans
                .iter()
                .find(|r| r.span.name == "completer resume")?
                .clone();
            let trace: Vec<Received> = spans
                .into_iter()
                .filter(|r| r.trace_id() == root.trace_id())
                .collect();
            Some((root, trace))
        })
        .await;
    let (root, trace) = completed;
    assert!(root.parent_id().is_empty() || root.parent_id() == "0000000000000000");
    assert_eq!(root.attribute("shop_id").as_deref(), Some(common::SHOP));
    assert_eq!(root.attribute("result").as_deref(), Some("finished"));
    assert!(
        trace
            .iter()
            .any(|r| r.span.name.starts_with("acquirer") && r.parent_id() == root.span_id()),
        "{:?}",
        names(&trace)
    );

    let everything = receiver.0.lock().unwrap().clone();
    assert_nothing_secret(
        &everything,
        &["trace-key-", common::SECRET, "tok_ok", "tok_timeout"],
    );
    // Health checks and scrapes are not traced.
    assert!(
        everything
            .iter()
            .all(|r| r.attribute("http.route").as_deref() != Some("/metrics"))
    );
}

#[tokio::test]
async fn with_the_endpoint_down_requests_are_answered_and_the_drops_counted() {
    // An endpoint that takes connections and never answers.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", silent.local_addr().unwrap());
    let held = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            held.push(socket);
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("down.db").display());
    common::add_shop(&url).await;
    let mut command = std::process::Command::new(common::bin());
    command
        .arg("serve")
        .args([
            "--listen",
            "127.0.0.1:0",
            "--operator-listen",
            "127.0.0.1:0",
        ])
        .args(["--database-url", &url])
        .arg("--sim-ledger")
        .arg(common::ledger_path(dir.path()))
        .args(["--no-demo-shop", "--otlp-queue", "4"])
        .args(["--otlp-endpoint", &endpoint])
        .env("RUST_LOG", "info");
    let server = common::Process::spawn(command, "down").await;

    let client = common::client();
    for n in 0..20 {
        let (header, _, _) = traceparent();
        let answer = client
            .post(server.url("/v1/payments"))
            .basic_auth(common::SHOP, Some(common::SECRET))
            .header("idempotency-key", format!("down-{n}"))
            .header("content-type", "application/json")
            .header("traceparent", header)
            .body(common::payment_body(&format!("order-down-{n}"), "tok_ok"))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 201);
    }
    let metrics = client
        .get(server.operator_url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let value = |series: &str| -> u64 {
        metrics
            .lines()
            .find_map(|line| line.strip_prefix(series))
            .and_then(|rest| rest.trim().parse().ok())
            .unwrap_or_else(|| panic!("{series} in {metrics}"))
    };
    assert_eq!(
        value("chargeonce_trace_spans_total{result=\"exported\"}"),
        0
    );
    assert!(
        value("chargeonce_trace_spans_total{result=\"dropped\"}") > 0,
        "{metrics}"
    );
    assert!(value("chargeonce_trace_queue_spans") <= 4);
    held.abort();
}
