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
//! | `chargeonce_acquirer_calls_total` | `mode`, `call`, `outcome` | acquirer calls by outcome, live mode's or test mode's |
//! | `chargeonce_acquirer_call_duration_seconds` | `mode`, `call`, `outcome` | their latency |
//! | `chargeonce_completer_runs_total` | `result` | completer attempts on stalled keys |
//! | `chargeonce_reconciler_findings_total` | `mode`, `kind` | orphan, duplicate, missing charges, mismatches |
//! | `chargeonce_reconciler_resolved_total` | | pending payments settled from the acquirer's answer |
//! | `chargeonce_sweeper_deleted_total` | | expired keys deleted |
//! | `chargeonce_webhooks_total` | `result` | acquirer webhooks by result |
//! | `chargeonce_event_deliveries_total` | `mode`, `result` | merchant event delivery attempts (`delivered`, `failed`: due again later, `gave_up`: failed and the event given up) |
//! | `chargeonce_refusals_total` | `reason` | requests refused by a limit: `rate_limited` (a shop's rate), `auth_failures` (a client address past its failure budget), `unseen_lookups` (the ceiling on look-ups of unseen shops), `console_logins`, `body_timeout`, `request_timeout`, `store_overloaded`, `waiters_instance`, `waiters_shop` (see [`crate::limits`], [`crate::auth_limits`]) |
//! | `chargeonce_http_responses_total` | `listener`, `class` | answers by listener (`api`, `operator`) and status class (`2xx`, `3xx`, `4xx`, `5xx`) |
//! | `chargeonce_payments_pending` | | payments still pending, read from the store at each scrape |
//! | `chargeonce_payments_pending_oldest_age_seconds` | | how long the oldest pending payment has waited (0 when none), at each scrape |
//! | `chargeonce_findings_open` | | reconciliation findings not resolved, at each scrape |
//! | `chargeonce_findings_open_by_kind` | `kind` | the same by kind (every kind a series, 0 when none) |
//! | `chargeonce_events_undelivered` | | deliveries of merchant events (one per event and endpoint) neither delivered nor given up (parked ones, to disabled endpoints, included), at each scrape |
//! | `chargeonce_events_due` | | deliveries the relay owes: neither delivered nor given up, to enabled endpoints (not parked), at each scrape |
//! | `chargeonce_events_due_oldest_age_seconds` | | how long the oldest of them has been due (0 when none), at each scrape |
//! | `chargeonce_sqlite_write_queue_depth` | | SQLite store only: writes waiting for the writer, at each scrape ([`StorePressure`]) |
//! | `chargeonce_sqlite_write_queue_limit` | | SQLite store only: the most that may wait before new work is refused (`--sqlite-queue`; 0: no limit) |
//! | `chargeonce_pg_pool_connections` | `state` | PostgreSQL store only: open connections `idle` and `in_use`, at each scrape |
//! | `chargeonce_pg_pool_max_connections` | | PostgreSQL store only: the pool's maximum (`--max-connections`) |
//! | `chargeonce_pg_pool_acquire_wait_seconds` | | PostgreSQL store only: histogram of the waits for a connection (100 µs doubling to about 3.3 s) |
//! | `chargeonce_connections_closed_total` | `reason` | client connections the server closed: `make_room` (idle, for a new connection at the cap), `client_share` (idle, for the same client at its share), `share_busy` (a new one over its client's share, all busy), `header_timeout`, `idle_timeout` (see [`crate::conn`]) |

use std::time::Duration;

use chargeonce_core::api_key::Mode;
use chargeonce_core::findings::FindingKind;
use chargeonce_core::store::{StoreCounts, StorePressure};
use chargeonce_core::{AcquirerCall, AcquirerOutcomeKind, CompleterResult, Observer};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Metric, Registry};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
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
    findings_open_by_kind: Family<Labels, Gauge>,
    events_undelivered: Gauge,
    events_due: Gauge,
    events_due_oldest_age: Gauge<f64, AtomicU64>,
    pressure: Arc<PressureGauges>,
}

/// The gauges of the store's own resources ([`StorePressure`]): written at
/// each scrape, and only the families the store has (the SQLite writer's
/// queue, or the PostgreSQL pool) are in the exposition at all.
#[derive(Debug, Default)]
struct PressureGauges {
    latest: Mutex<Option<StorePressure>>,
}

/// A histogram read whole from a snapshot (the pool's acquire waits).
#[derive(Debug)]
struct ConstHistogram<'a>(&'a chargeonce_core::store::WaitHistogram);

impl EncodeMetric for ConstHistogram<'_> {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        encoder.encode_histogram::<NoLabelSet>(
            self.0.sum_seconds,
            self.0.count,
            &self.0.buckets,
            None,
        )
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

/// `n` as a gauge's value.
fn gauge_value(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl Collector for PressureGauges {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(pressure) = self.latest.lock().ok().and_then(|latest| latest.clone()) else {
            return Ok(());
        };
        let mut gauge = |name: &str, help: &str, value: u64| -> Result<(), std::fmt::Error> {
            let metric = ConstGauge::new(gauge_value(value));
            metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)
        };
        if let Some(queue) = pressure.write_queue {
            gauge(
                "sqlite_write_queue_depth",
                "Writes waiting for the SQLite writer (read at each scrape)",
                queue.depth,
            )?;
            gauge(
                "sqlite_write_queue_limit",
                "The most writes that may wait for the SQLite writer before new work is refused (--sqlite-queue; 0: no limit)",
                queue.limit,
            )?;
        }
        if let Some(pool) = pressure.pool {
            gauge(
                "pg_pool_max_connections",
                "The most connections the PostgreSQL pool opens (--max-connections)",
                pool.max,
            )?;
            let mut family = encoder.encode_descriptor(
                "pg_pool_connections",
                "Open PostgreSQL pool connections by state (read at each scrape)",
                None,
                MetricType::Gauge,
            )?;
            for (state, value) in [("idle", pool.idle), ("in_use", pool.in_use)] {
                let labels: Labels = vec![("state", state)];
                ConstGauge::new(gauge_value(value)).encode(family.encode_family(&labels)?)?;
            }
            let waits = ConstHistogram(&pool.acquire_wait);
            waits.encode(encoder.encode_descriptor(
                "pg_pool_acquire_wait_seconds",
                "How long the store waited for a PostgreSQL connection",
                None,
                waits.metric_type(),
            )?)?;
        }
        Ok(())
    }
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
            findings_open_by_kind: registered(
                r,
                "findings_open_by_kind",
                "Reconciliation findings not resolved, by kind (read at each scrape)",
                Family::<Labels, Gauge>::default(),
            ),
            events_undelivered: registered(
                r,
                "events_undelivered",
                "Merchant events neither delivered nor given up (read at each scrape)",
                Gauge::default(),
            ),
            events_due: registered(
                r,
                "events_due",
                "Merchant events due for delivery to shops with a webhook URL (read at each scrape)",
                Gauge::default(),
            ),
            events_due_oldest_age: registered(
                r,
                "events_due_oldest_age_seconds",
                "How long the oldest merchant event due for delivery has been due (0 when none)",
                Gauge::<f64, AtomicU64>::default(),
            ),
            pressure: {
                let pressure = Arc::new(PressureGauges::default());
                r.register_collector(Box::new(pressure.clone()));
                pressure
            },
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
        let gauge = gauge_value;
        self.payments_pending.set(gauge(counts.pending_payments));
        self.findings_open.set(gauge(counts.open_findings));
        for kind in FindingKind::ALL {
            self.findings_open_by_kind
                .get_or_create(&vec![("kind", kind.as_str())])
                .set(gauge(counts.open_findings_of(kind)));
        }
        self.events_undelivered
            .set(gauge(counts.undelivered_events));
        self.events_due.set(gauge(counts.due_events));
        let age = |at: Option<OffsetDateTime>| {
            at.map(|at| (now - at).as_seconds_f64().max(0.0))
                .unwrap_or(0.0)
        };
        self.pending_oldest_age.set(age(counts.oldest_pending_at));
        self.events_due_oldest_age.set(age(counts.oldest_due_at));
    }

    /// Sets the gauges of the store's writer queue or connection pool, read
    /// at each scrape (families the store does not have stay out of the
    /// exposition).
    pub fn store_pressure(&self, pressure: StorePressure) {
        if let Ok(mut latest) = self.pressure.latest.lock() {
            *latest = Some(pressure);
        }
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

    fn acquirer_call(
        &self,
        mode: Mode,
        call: AcquirerCall,
        outcome: AcquirerOutcomeKind,
        latency: Duration,
    ) {
        let labels = vec![
            ("mode", mode.as_str()),
            ("call", call.as_str()),
            ("outcome", outcome.as_str()),
        ];
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

    fn reconciler_finding(&self, mode: Mode, kind: &'static str) {
        self.findings
            .get_or_create(&vec![("mode", mode.as_str()), ("kind", kind)])
            .inc();
    }

    fn reconciler_resolved(&self) {
        self.resolved.inc();
    }

    fn swept(&self, deleted: u64) {
        self.swept.inc_by(deleted);
    }

    fn event_delivery(&self, mode: Mode, result: &'static str) {
        self.event_deliveries
            .get_or_create(&vec![("mode", mode.as_str()), ("result", result)])
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
            Mode::Live,
            AcquirerCall::Charge,
            AcquirerOutcomeKind::Unknown,
            Duration::from_millis(30),
        );
        metrics.reconciler_finding(Mode::Live, "duplicate_charge");
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
                open_findings_by_kind: [0, 1, 0, 0],
                undelivered_events: 4,
                due_events: 2,
                oldest_due_at: Some(now - Duration::from_secs(30)),
                oldest_pending_at: Some(now - Duration::from_secs(90)),
            },
            now,
        );
        metrics.event_delivery(Mode::Live, "gave_up");
        let text = metrics.render();
        for line in [
            "chargeonce_claims_total 2",
            "chargeonce_mismatches_total 1",
            "chargeonce_replays_total 0",
            "chargeonce_acquirer_calls_total{mode=\"live\",call=\"charge\",outcome=\"unknown\"} 1",
            "chargeonce_acquirer_call_duration_seconds_count{mode=\"live\",call=\"charge\",outcome=\"unknown\"} 1",
            "chargeonce_reconciler_findings_total{mode=\"live\",kind=\"duplicate_charge\"} 1",
            "chargeonce_sweeper_deleted_total 5",
            "chargeonce_webhooks_total{result=\"duplicate\"} 1",
            "chargeonce_http_responses_total{listener=\"api\",class=\"2xx\"} 1",
            "chargeonce_http_responses_total{listener=\"api\",class=\"5xx\"} 2",
            "chargeonce_http_responses_total{listener=\"api\",class=\"4xx\"} 0",
            "chargeonce_payments_pending 3",
            "chargeonce_payments_pending_oldest_age_seconds 90.0",
            "chargeonce_findings_open 1",
            "chargeonce_events_undelivered 4",
            "chargeonce_findings_open_by_kind{kind=\"orphan_charge\"} 1",
            "chargeonce_findings_open_by_kind{kind=\"duplicate_charge\"} 0",
            "chargeonce_events_due 2",
            "chargeonce_events_due_oldest_age_seconds 30.0",
            "chargeonce_event_deliveries_total{mode=\"live\",result=\"gave_up\"} 1",
        ] {
            assert!(text.contains(line), "missing `{line}` in:\n{text}");
        }
        // No pressure read yet: neither store's families.
        assert!(!text.contains("sqlite_write_queue"), "{text}");
        assert!(!text.contains("pg_pool"), "{text}");
        assert!(text.ends_with("# EOF\n"));
    }

    #[test]
    fn each_store_pressure_shows_only_its_own_families() {
        use chargeonce_core::store::{PoolUse, WaitHistogram, WriteQueue};
        let metrics = Metrics::new();
        metrics.store_pressure(StorePressure {
            write_queue: Some(WriteQueue {
                depth: 7,
                limit: 4096,
            }),
            pool: None,
        });
        let text = metrics.render();
        for line in [
            "# TYPE chargeonce_sqlite_write_queue_depth gauge",
            "chargeonce_sqlite_write_queue_depth 7",
            "chargeonce_sqlite_write_queue_limit 4096",
        ] {
            assert!(text.contains(line), "missing `{line}` in:\n{text}");
        }
        assert!(!text.contains("pg_pool"), "{text}");
        assert!(text.ends_with("# EOF\n"));

        metrics.store_pressure(StorePressure {
            write_queue: None,
            pool: Some(PoolUse {
                idle: 3,
                in_use: 5,
                max: 16,
                acquire_wait: WaitHistogram {
                    buckets: vec![(0.001, 4), (0.01, 1), (f64::INFINITY, 1)],
                    count: 6,
                    sum_seconds: 5.5,
                },
            }),
        });
        let text = metrics.render();
        for line in [
            "# TYPE chargeonce_pg_pool_connections gauge",
            "chargeonce_pg_pool_connections{state=\"idle\"} 3",
            "chargeonce_pg_pool_connections{state=\"in_use\"} 5",
            "chargeonce_pg_pool_max_connections 16",
            "# TYPE chargeonce_pg_pool_acquire_wait_seconds histogram",
            "chargeonce_pg_pool_acquire_wait_seconds_sum 5.5",
            "chargeonce_pg_pool_acquire_wait_seconds_count 6",
            "chargeonce_pg_pool_acquire_wait_seconds_bucket{le=\"0.001\"} 4",
            "chargeonce_pg_pool_acquire_wait_seconds_bucket{le=\"0.01\"} 5",
            "chargeonce_pg_pool_acquire_wait_seconds_bucket{le=\"+Inf\"} 6",
        ] {
            assert!(text.contains(line), "missing `{line}` in:\n{text}");
        }
        assert!(!text.contains("sqlite_write_queue"), "{text}");
        assert!(text.ends_with("# EOF\n"));
    }
}
