//! # chargeonce-telemetry
//!
//! OpenTelemetry traces for chargeonce, off unless an OTLP endpoint is given.
//!
//! - [`Telemetry::start`] builds the exporter (OTLP over HTTP with protobuf,
//!   to `{endpoint}/v1/traces`, as `OTEL_EXPORTER_OTLP_ENDPOINT` means it)
//!   behind a bounded queue ([`queue`]): a span that finds the queue full is
//!   dropped and counted, never waited for, so an endpoint that is down or
//!   slow costs a request nothing but the span.
//! - [`Telemetry::layer`] is the `tracing` layer that turns the service's
//!   spans into OpenTelemetry spans: spans only (log lines stay logs), of
//!   chargeonce's own crates, not of the operator listener
//!   ([`OPERATOR_TARGET`]: health checks and scrapes are not traced); a
//!   trace starts at a request or a worker's step on a key ([`ROOT_SPANS`]),
//!   and store and acquirer spans are its children.
//! - [`context`] carries the W3C `traceparent` in (a request continues the
//!   caller's trace) and out (the acquirer call carries it).
//!
//! The crate knows nothing of HTTP routes or stores: the server names its
//! spans, this crate only exports them.
//!
//! ```no_run
//! use tracing_subscriber::layer::SubscriberExt as _;
//! use tracing_subscriber::util::SubscriberInitExt as _;
//!
//! let config = chargeonce_telemetry::Config::new("http://127.0.0.1:4318", "chargeonce");
//! let telemetry = chargeonce_telemetry::Telemetry::start(&config)?;
//! tracing_subscriber::registry().with(telemetry.layer()).init();
//! // ... serve ...
//! telemetry.shutdown();
//! # Ok::<(), chargeonce_telemetry::TelemetryError>(())
//! ```

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::{DynFilterFn, FilterExt as _, Targets};
use tracing_subscriber::registry::LookupSpan;

pub mod context;
pub mod queue;

pub use queue::SpanCounters;

/// The `tracing` target of the operator listener's request spans: the
/// layer leaves them out (a scrape every few seconds is not a trace anyone
/// follows).
pub const OPERATOR_TARGET: &str = "chargeonce::operator";

/// The names of the spans that start a trace: a request (the server's
/// `request` span) and a worker's step on one payment (`worker.…`, such as
/// the completer resuming a key). Any other span is exported only inside
/// one of these.
pub const ROOT_SPANS: &[&str] = &["request", "worker.complete_key"];

/// The default bound of the export queue, in spans: at about eight spans a
/// payment, a second of 250 payments a second.
pub const DEFAULT_QUEUE: usize = 2048;

/// How long one export may take before it counts as failed (its spans are
/// lost). The exporter retries within it.
pub const DEFAULT_EXPORT_TIMEOUT: Duration = Duration::from_secs(5);

/// Whether a [`Telemetry`] was started in this process: [`context`] does
/// nothing until then, so traces off cost no header parsing.
static ENABLED: AtomicBool = AtomicBool::new(false);

/// Whether traces are on in this process.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Where and how traces are exported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The OTLP/HTTP base URL (`http://collector:4318`); spans go to
    /// `{endpoint}/v1/traces`.
    pub endpoint: String,
    /// The `service.name` resource attribute.
    pub service_name: String,
    /// The export queue's bound, in spans ([`DEFAULT_QUEUE`]).
    pub queue: usize,
    /// The longest one export may take ([`DEFAULT_EXPORT_TIMEOUT`]).
    pub export_timeout: Duration,
}

impl Config {
    /// Traces to `endpoint` as `service_name`, with the default queue and
    /// timeout.
    pub fn new(endpoint: impl Into<String>, service_name: impl Into<String>) -> Self {
        Self {
            endpoint: endpoint.into(),
            service_name: service_name.into(),
            queue: DEFAULT_QUEUE,
            export_timeout: DEFAULT_EXPORT_TIMEOUT,
        }
    }

    /// The URL spans are posted to: the endpoint with `/v1/traces`, as the
    /// OTLP specification builds it from `OTEL_EXPORTER_OTLP_ENDPOINT`.
    pub fn traces_url(&self) -> String {
        format!("{}/v1/traces", self.endpoint.trim_end_matches('/'))
    }
}

/// Why traces could not be started.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The endpoint is not an `http` or `https` URL.
    #[error("--otlp-endpoint `{0}` is not an http:// or https:// URL")]
    Endpoint(String),
    /// The queue bound is zero.
    #[error("the trace export queue must hold at least one span")]
    Queue,
    /// The OTLP exporter could not be built.
    #[error("cannot build the OTLP exporter: {0}")]
    Exporter(#[from] opentelemetry_otlp::ExporterBuildError),
}

/// Traces on: the provider and its export queue's counters. Keep it for the
/// process's life and [`Telemetry::shutdown`] it at the end, which exports
/// what is still queued (within the export timeout).
#[derive(Debug)]
pub struct Telemetry {
    provider: SdkTracerProvider,
    counters: SpanCounters,
}

impl Telemetry {
    /// Builds the exporter and its bounded queue (nothing is sent until a
    /// span ends) and turns [`context`] on.
    pub fn start(config: &Config) -> Result<Self, TelemetryError> {
        let url = config.traces_url();
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(TelemetryError::Endpoint(config.endpoint.clone()));
        }
        if config.queue == 0 {
            return Err(TelemetryError::Queue);
        }
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_endpoint(url)
            .with_timeout(config.export_timeout)
            .with_headers(Default::default())
            .build()?;
        let counters = SpanCounters::default();
        let exporter = queue::CountingExporter::new(exporter, counters.clone());
        let batches = BatchSpanProcessor::builder(exporter)
            .with_batch_config(
                BatchConfigBuilder::default()
                    // The gate below keeps the queue under this bound, so
                    // the processor itself never drops uncounted.
                    .with_max_queue_size(config.queue)
                    .with_max_export_batch_size(config.queue.min(512))
                    .with_scheduled_delay(Duration::from_millis(500))
                    .build(),
            )
            .build();
        let gate = queue::Gate::new(batches, config.queue, counters.clone());
        let resource = Resource::builder()
            .with_service_name(config.service_name.clone())
            .build();
        let provider = SdkTracerProvider::builder()
            .with_span_processor(gate)
            .with_resource(resource)
            .build();
        ENABLED.store(true, Ordering::Relaxed);
        Ok(Self { provider, counters })
    }

    /// The `tracing` layer exporting chargeonce's spans (of every level the
    /// code creates them at, from `DEBUG` up; events are not exported).
    pub fn layer<S>(&self) -> impl Layer<S> + Send + Sync + 'static
    where
        S: tracing::Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
    {
        let tracer = self.provider.tracer("chargeonce");
        let ours = Targets::new()
            .with_target(OPERATOR_TARGET, tracing::level_filters::LevelFilter::OFF)
            .with_target("chargeonce", tracing::Level::DEBUG);
        // A store or acquirer span is exported inside a trace (a request's,
        // a worker's item), never as a trace of its own: the workers' polls
        // would otherwise each be one.
        let in_a_trace = DynFilterFn::new(
            |metadata: &tracing::Metadata<'_>, cx: &tracing_subscriber::layer::Context<'_, S>| {
                metadata.is_span()
                    && (ROOT_SPANS.contains(&metadata.name()) || cx.lookup_current().is_some())
            },
        )
        // Events are never exported: their call sites are off for this layer
        // once and for all, not asked at every event.
        .with_callsite_filter(|metadata: &'static tracing::Metadata<'static>| {
            if metadata.is_span() {
                tracing::subscriber::Interest::sometimes()
            } else {
                tracing::subscriber::Interest::never()
            }
        });
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_location(false)
            .with_target(false)
            .with_threads(false)
            .with_tracked_inactivity(false)
            // Not made the thread's current OpenTelemetry context at every
            // poll of an instrumented future: nothing here reads
            // `Context::current()` (the acquirer call's context is taken
            // from its span), and entering spans is the hot part.
            .with_context_activation(false)
            .with_filter(ours.and(in_a_trace))
    }

    /// The export queue's counters (spans exported, dropped, failed), for
    /// the metrics.
    pub fn counters(&self) -> SpanCounters {
        self.counters.clone()
    }

    /// Exports what is queued (within the export timeout) and stops.
    pub fn shutdown(self) {
        ENABLED.store(false, Ordering::Relaxed);
        if let Err(error) = self.provider.shutdown() {
            tracing::warn!(%error, "traces still queued at shutdown may be lost");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_traces_url_is_the_endpoint_with_its_path() {
        let config = Config::new("http://127.0.0.1:4318/", "chargeonce");
        assert_eq!(config.traces_url(), "http://127.0.0.1:4318/v1/traces");
        let config = Config::new("https://otel.example/base", "chargeonce");
        assert_eq!(config.traces_url(), "https://otel.example/base/v1/traces");
    }

    #[test]
    fn a_url_of_another_scheme_is_refused() {
        let config = Config::new("127.0.0.1:4318", "chargeonce");
        assert!(matches!(
            Telemetry::start(&config),
            Err(TelemetryError::Endpoint(_))
        ));
        let mut config = Config::new("http://127.0.0.1:4318", "chargeonce");
        config.queue = 0;
        assert!(matches!(
            Telemetry::start(&config),
            Err(TelemetryError::Queue)
        ));
    }
}
