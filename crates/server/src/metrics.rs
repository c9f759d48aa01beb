//! Prometheus metrics, served at `GET /metrics` in the text format.
//!
//! One explicit [`Registry`] per [`Metrics`] (no global recorder), so tests in
//! one process each read their own values. [`Metrics`] is the engine's and
//! the workers' [`Observer`]; the webhook route counts through it too.
//!
//! | metric | labels | what |
//! |---|---|---|
//! | `chargeonce_claims_total` | | new keys claimed |
//! | `chargeonce_replays_total` | | stored answers replayed |
//! | `chargeonce_conflicts_total` | | 409: the key's first request still runs |
//! | `chargeonce_mismatches_total` | | 422: a key reused for another request |
//! | `chargeonce_lease_takeovers_total` | | expired leases taken over (retries, completer) |
//! | `chargeonce_repeated_keys_total` | | keys past the repeat warning threshold (logged) |
//! | `chargeonce_store_errors_total` | `operation` | failed store calls |
//! | `chargeonce_acquirer_calls_total` | `call`, `outcome` | acquirer calls by outcome |
//! | `chargeonce_acquirer_call_duration_seconds` | `call`, `outcome` | their latency |
//! | `chargeonce_completer_runs_total` | `result` | completer attempts on stalled keys |
//! | `chargeonce_reconciler_findings_total` | `kind` | orphan, duplicate, missing charges, mismatches |
//! | `chargeonce_reconciler_resolved_total` | | pending payments settled from the acquirer's answer |
//! | `chargeonce_sweeper_deleted_total` | | expired keys deleted |
//! | `chargeonce_webhooks_total` | `result` | acquirer webhooks by result |
//! | `chargeonce_event_deliveries_total` | `result` | merchant event delivery attempts (`delivered`, `failed`) |
//! | `chargeonce_refusals_total` | `reason` | requests refused by a limit: `rate_limited` (a shop's rate), `auth_failures` (a client address past its failure budget), `unseen_lookups` (the ceiling on look-ups of unseen shops), `console_logins`, `body_timeout`, `request_timeout`, `store_overloaded`, `waiters_instance`, `waiters_shop` (see [`crate::limits`], [`crate::auth_limits`]) |
//! | `chargeonce_http_responses_total` | `listener`, `class` | answers by listener (`api`, `operator`) and status class (`2xx`, `3xx`, `4xx`, `5xx`) |
//! | `chargeonce_payments_pending` | | payments still pending, read from the store at each scrape |
//! | `chargeonce_payments_pending_oldest_age_seconds` | | how long the oldest pending payment has waited (0 when none), at each scrape |
//! | `chargeonce_findings_open` | | reconciliation findings not resolved, at each scrape |
//! | `chargeonce_events_undelivered` | | merchant events neither delivered nor given up (parked ones of shops without a webhook URL included), at each scrape |
//! | `chargeonce_connections_closed_total` | `reason` | client connections the server closed: `make_room` (idle, for a new connection at the cap), `client_share` (idle, for the same client at its share), `share_busy` (a new one over its client's share, all busy), `header_timeout`, `idle_timeout` (see [`crate::conn`]) |

use std::time::Duration;

use chargeonce_core::store::StoreCounts;
use chargeonce_core::{AcquirerCall, AcquirerOutcomeKind, CompleterResult, Observer};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Metric, Registry};
use std::sync::atomic::AtomicU64;
use time::OffsetDateTime;

/// Label pairs.
type Labels = Vec<(&'static str, &'static str)>;

/// A histogram family with our latency buckets (1 ms to about 33 s).
type Latencies = Family<Labels, Histogram, fn() -> Histogram>;

fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

/// Some of this instance's counters at one moment, for the console.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// New keys claimed (payments and refunds started).
    pub claims: u64,
    /// Stored answers replayed.
    pub replays: u64,
    /// 409s.
    pub conflicts: u64,
    /// 422s: a key reused for another request.
    pub mismatches: u64,
    /// Expired leases taken over.
    pub takeovers: u64,
}

/// The answer counters of one listener, by status class
/// ([`Metrics::responses`]).
#[derive(Debug, Clone)]
pub struct ResponseCounters {
    by_class: [Counter; 5],
}

impl ResponseCounters {
    /// Counts one answer with this status.
    pub fn count(&self, status: u16) {
        let class = match status {
            200..=299 => 0,
            300..=399 => 1,
            400..=499 => 2,
            500..=599 => 3,
            _ => 4,
        };
        self.by_class[class].inc();
    }
}

/// Every metric of one service instance, in its own registry.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    claims: Counter,
    replays: Counter,
    conflicts: Counter,
    mismatches: Counter,
    takeovers: Counter,
    repeated_keys: Counter,
    store_errors: Family<Labels, Counter>,
    acquirer_calls: Family<Labels, Counter>,
    acquirer_latency: Latencies,
    completer_runs: Family<Labels, Counter>,
    findings: Family<Labels, Counter>,
    resolved: Counter,
    swept: Counter,
    webhooks: Family<Labels, Counter>,
    event_deliveries: Family<Labels, Counter>,
    refusals: Family<Labels, Counter>,
    connections_closed: Family<Labels, Counter>,
    http_responses: Family<Labels, Counter>,
    payments_pending: Gauge,
    pending_oldest_age: Gauge<f64, AtomicU64>,
    findings_open: Gauge,
    events_undelivered: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// `metric`, registered in `registry` under `name` with `help`.
fn registered<M: Metric + Clone>(registry: &mut Registry, name: &str, help: &str, metric: M) -> M {
    registry.register(name, help, metric.clone());
    metric
}

impl Metrics {
    /// Adds the trace export queue's counters ([`crate::trace_spans`]), with
    /// traces on.
    pub fn with_trace_spans(mut self, counters: chargeonce_telemetry::SpanCounters) -> Self {
        self.registry
            .register_collector(Box::new(crate::trace_spans::TraceSpans(counters)));
        self
    }

    /// A registry with every metric registered at zero.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("chargeonce");
        let r = &mut registry;
        Self {
            claims: registered(
                r,
                "claims",
                "New idempotency keys claimed",
                Counter::default(),
            ),
            replays: registered(r, "replays", "Stored answers replayed", Counter::default()),
            conflicts: registered(
                r,
                "conflicts",
                "Requests answered 409: the key's first request still runs",
                Counter::default(),
            ),
            mismatches: registered(
                r,
                "mismatches",
                "Requests answered 422: a key reused for another request",
                Counter::default(),
            ),
            takeovers: registered(
                r,
                "lease_takeovers",
                "Expired leases taken over by a retry or the completer",
                Counter::default(),
            ),
            repeated_keys: registered(
                r,
                "repeated_keys",
                "Keys repeated past the warning threshold",
                Counter::default(),
            ),
            store_errors: registered(
                r,
                "store_errors",
                "Failed store calls",
                Family::<Labels, Counter>::default(),
            ),
            acquirer_calls: registered(
                r,
                "acquirer_calls",
                "Acquirer calls by outcome",
                Family::<Labels, Counter>::default(),
            ),
            acquirer_latency: registered(
                r,
                "acquirer_call_duration_seconds",
                "Acquirer call latency by outcome",
                Latencies::new_with_constructor(latency_histogram),
            ),
            completer_runs: registered(
                r,
                "completer_runs",
                "Completer attempts on stalled keys, by result",
                Family::<Labels, Counter>::default(),
            ),
            findings: registered(
                r,
                "reconciler_findings",
                "Reconciler findings by kind",
                Family::<Labels, Counter>::default(),
            ),
            resolved: registered(
                r,
                "reconciler_resolved",
                "Pending payments settled by the reconciler",
                Counter::default(),
            ),
            swept: registered(
                r,
                "sweeper_deleted",
                "Expired keys deleted",
                Counter::default(),
            ),
            webhooks: registered(
                r,
                "webhooks",
                "Acquirer webhooks by result",
                Family::<Labels, Counter>::default(),
            ),
            event_deliveries: registered(
                r,
                "event_deliveries",
                "Merchant event delivery attempts by result",
                Family::<Labels, Counter>::default(),
            ),
            refusals: registered(
                r,
                "refusals",
                "Requests refused by a limit, by reason",
                Family::<Labels, Counter>::default(),
            ),
            connections_closed: registered(
                r,
                "connections_closed",
                "Client connections the server closed, by reason",
                Family::<Labels, Counter>::default(),
            ),
            http_responses: registered(
                r,
                "http_responses",
                "Answers by listener and status class",
                Family::<Labels, Counter>::default(),
            ),
            payments_pending: registered(
                r,
                "payments_pending",
                "Payments still pending (read from the store at each scrape)",
                Gauge::default(),
            ),
            pending_oldest_age: registered(
                r,
                "payments_pending_oldest_age_seconds",
                "How long the oldest pending payment has waited (0 when none)",
                Gauge::<f64, AtomicU64>::default(),
            ),
            findings_open: registered(
                r,
                "findings_open",
                "Reconciliation findings not resolved (read at each scrape)",
                Gauge::default(),
            ),
            events_undelivered: registered(
                r,
                "events_undelivered",
                "Merchant events neither delivered nor given up (read at each scrape)",
                Gauge::default(),
            ),
            registry,
        }
    }

    /// Counts a request refused by a limit (`reason`: the problem code, or
    /// `waiters_instance` / `waiters_shop`).
    pub fn refused(&self, reason: &'static str) {
        self.refusals.get_or_create(&vec![("reason", reason)]).inc();
    }

    /// The observer that counts the connections a listener closes, for
    /// [`crate::conn::serve_observed`].
    pub fn close_observer(metrics: &std::sync::Arc<Self>) -> crate::conn::CloseObserver {
        let metrics = metrics.clone();
        std::sync::Arc::new(move |reason| metrics.connection_closed(reason))
    }

    /// Counts a client connection the server closed.
    pub fn connection_closed(&self, reason: crate::conn::CloseReason) {
        self.connections_closed
            .get_or_create(&vec![("reason", reason.as_str())])
            .inc();
    }

    /// Counts one acquirer webhook by its result (`applied`, `duplicate`,
    /// `no_change`, `conflict`, `unknown_payment`, `bad_signature`, ...).
    pub fn webhook(&self, result: &'static str) {
        self.webhooks.get_or_create(&vec![("result", result)]).inc();
    }

    /// Counts a store failure while recording a webhook.
    pub fn store_error_webhook(&self) {
        self.store_error("webhook");
    }

    /// The running totals the console's overview charts (since this
    /// instance started).
    pub fn counters(&self) -> Counters {
        Counters {
            claims: self.claims.get(),
            replays: self.replays.get(),
            conflicts: self.conflicts.get(),
            mismatches: self.mismatches.get(),
            takeovers: self.takeovers.get(),
        }
    }

    /// Counts a failed store call of an operation the engine does not make
    /// (a scrape's counts).
    pub fn store_error_named(&self, operation: &'static str) {
        self.store_errors
            .get_or_create(&vec![("operation", operation)])
            .inc();
    }

    /// The counters of `listener`'s answers, one per status class, made
    /// once (each class is a series from the start, at 0): counting an
    /// answer is then one atomic add, no label lookup on the request path.
    pub fn responses(&self, listener: &'static str) -> ResponseCounters {
        let class = |class| {
            self.http_responses
                .get_or_create(&vec![("listener", listener), ("class", class)])
                .clone()
        };
        ResponseCounters {
            by_class: [
                class("2xx"),
                class("3xx"),
                class("4xx"),
                class("5xx"),
                class("other"),
            ],
        }
    }

    /// Sets the gauges read from the store: its counts, and the age of the
    /// oldest pending payment at `now`.
    pub fn store_counts(&self, counts: &StoreCounts, now: OffsetDateTime) {
        let gauge = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        self.payments_pending.set(gauge(counts.pending_payments));
        self.findings_open.set(gauge(counts.open_findings));
        self.events_undelivered
            .set(gauge(counts.undelivered_events));
        let age = counts
            .oldest_pending_at
            .map(|at| (now - at).as_seconds_f64().max(0.0))
            .unwrap_or(0.0);
        self.pending_oldest_age.set(age);
    }

    /// The Prometheus text format of every metric.
    pub fn render(&self) -> String {
        let mut out = String::new();
        if let Err(error) = encode(&mut out, &self.registry) {
            tracing::error!(%error, "cannot encode metrics");
        }
        out
    }
}

impl Observer for Metrics {
    fn claimed(&self) {
        self.claims.inc();
    }

    fn replayed(&self) {
        self.replays.inc();
    }

    fn in_progress(&self) {
        self.conflicts.inc();
    }

    fn mismatch(&self) {
        self.mismatches.inc();
    }

    fn taken_over(&self) {
        self.takeovers.inc();
    }

    fn repeated_key(&self, _repeats: u64) {
        self.repeated_keys.inc();
    }

    fn acquirer_call(&self, call: AcquirerCall, outcome: AcquirerOutcomeKind, latency: Duration) {
        let labels = vec![("call", call.as_str()), ("outcome", outcome.as_str())];
        self.acquirer_calls.get_or_create(&labels).inc();
        self.acquirer_latency
            .get_or_create(&labels)
            .observe(latency.as_secs_f64());
    }

    fn store_error(&self, operation: &'static str) {
        self.store_errors
            .get_or_create(&vec![("operation", operation)])
            .inc();
    }

    fn completer_run(&self, result: CompleterResult) {
        self.completer_runs
            .get_or_create(&vec![("result", result.as_str())])
            .inc();
    }

    fn reconciler_finding(&self, kind: &'static str) {
        self.findings.get_or_create(&vec![("kind", kind)]).inc();
    }

    fn reconciler_resolved(&self) {
        self.resolved.inc();
    }

    fn swept(&self, deleted: u64) {
        self.swept.inc_by(deleted);
    }

    fn event_delivery(&self, result: &'static str) {
        self.event_deliveries
            .get_or_create(&vec![("result", result)])
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_show_in_the_text_format() {
        let metrics = Metrics::new();
        metrics.claimed();
        metrics.claimed();
        metrics.mismatch();
        metrics.acquirer_call(
            AcquirerCall::Charge,
            AcquirerOutcomeKind::Unknown,
            Duration::from_millis(30),
        );
        metrics.reconciler_finding("duplicate_charge");
        metrics.swept(5);
        metrics.webhook("duplicate");
        let api = metrics.responses("api");
        api.count(201);
        api.count(503);
        api.count(502);
        let now = OffsetDateTime::now_utc();
        metrics.store_counts(
            &StoreCounts {
                pending_payments: 3,
                open_findings: 1,
                undelivered_events: 4,
                oldest_pending_at: Some(now - Duration::from_secs(90)),
            },
            now,
        );
        let text = metrics.render();
        for line in [
            "chargeonce_claims_total 2",
            "chargeonce_mismatches_total 1",
            "chargeonce_replays_total 0",
            "chargeonce_acquirer_calls_total{call=\"charge\",outcome=\"unknown\"} 1",
            "chargeonce_acquirer_call_duration_seconds_count{call=\"charge\",outcome=\"unknown\"} 1",
            "chargeonce_reconciler_findings_total{kind=\"duplicate_charge\"} 1",
            "chargeonce_sweeper_deleted_total 5",
            "chargeonce_webhooks_total{result=\"duplicate\"} 1",
            "chargeonce_http_responses_total{listener=\"api\",class=\"2xx\"} 1",
            "chargeonce_http_responses_total{listener=\"api\",class=\"5xx\"} 2",
            "chargeonce_http_responses_total{listener=\"api\",class=\"4xx\"} 0",
            "chargeonce_payments_pending 3",
            "chargeonce_payments_pending_oldest_age_seconds 90.0",
            "chargeonce_findings_open 1",
            "chargeonce_events_undelivered 4",
        ] {
            assert!(text.contains(line), "missing `{line}` in:\n{text}");
        }
        assert!(text.ends_with("# EOF\n"));
    }
}
