//! Where `chargeonce serve` sends its OpenTelemetry traces (off unless an
//! endpoint is given). The standard `OTEL_EXPORTER_OTLP_ENDPOINT` and
//! `OTEL_SERVICE_NAME` variables set the same as the flags.

use clap::Args;

/// [`chargeonce_telemetry::DEFAULT_QUEUE`], as the flag's type.
const DEFAULT_QUEUE: u32 = chargeonce_telemetry::DEFAULT_QUEUE as u32;

/// The trace flags.
#[derive(Debug, Clone, Args)]
pub struct TraceArgs {
    /// The OTLP/HTTP endpoint to export traces to (`http://collector:4318`;
    /// spans are posted to `{endpoint}/v1/traces` as protobuf). Unset: no
    /// traces.
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT", value_name = "URL")]
    pub otlp_endpoint: Option<String>,
    /// The `service.name` of the traces.
    #[arg(long, env = "OTEL_SERVICE_NAME", default_value = "chargeonce")]
    pub otel_service_name: String,
    /// How many ended spans may wait for export; past it spans are dropped
    /// (and counted in `chargeonce_trace_spans_total{result="dropped"}`),
    /// never waited for.
    #[arg(long, env = "CHARGEONCE_OTLP_QUEUE", default_value_t = DEFAULT_QUEUE,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub otlp_queue: u32,
}

impl TraceArgs {
    /// The exporter's configuration, when traces are on.
    pub fn config(&self) -> Option<chargeonce_telemetry::Config> {
        let endpoint = self.otlp_endpoint.as_deref().filter(|e| !e.is_empty())?;
        let mut config =
            chargeonce_telemetry::Config::new(endpoint, self.otel_service_name.clone());
        config.queue = self.otlp_queue as usize;
        Some(config)
    }
}
