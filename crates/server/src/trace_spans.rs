//! The trace export queue's counters as metrics (present only with traces
//! on, `--otlp-endpoint`): read from [`chargeonce_telemetry::SpanCounters`]
//! at each scrape, so a span costs no metric update.
//!
//! | metric | type | labels | what |
//! |---|---|---|---|
//! | `chargeonce_trace_spans_total` | counter | `result` | spans that ended: `exported`, `dropped` (the queue was full: the endpoint down or slower than the load), `failed` (lost with an export that failed) |
//! | `chargeonce_trace_queue_spans` | gauge | | spans waiting in the export queue |

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric as _};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

use chargeonce_telemetry::SpanCounters;

/// The collector of the trace export queue's counters.
#[derive(Debug)]
pub struct TraceSpans(pub SpanCounters);

impl Collector for TraceSpans {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut spans = encoder.encode_descriptor(
            "trace_spans",
            "Trace spans that ended, by what became of them (exported, dropped: queue full, failed: export failed).",
            None,
            MetricType::Counter,
        )?;
        for (result, count) in [
            ("exported", self.0.exported()),
            ("dropped", self.0.dropped()),
            ("failed", self.0.failed()),
        ] {
            let labels = [("result", result)];
            ConstCounter::new(count).encode(spans.encode_family(&labels)?)?;
        }
        let queued = encoder.encode_descriptor(
            "trace_queue_spans",
            "Trace spans waiting in the export queue.",
            None,
            MetricType::Gauge,
        )?;
        ConstGauge::new(i64::try_from(self.0.queued()).unwrap_or(i64::MAX)).encode(queued)
    }
}
