//! Latency recording: an HDR histogram of microseconds.

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

/// The slowest latency recorded exactly (longer ones are clamped to it).
const MAX_MICROS: u64 = 120_000_000;

/// A latency histogram in microseconds, 3 significant digits, 1 µs to 120 s.
#[derive(Debug, Clone)]
pub struct Latency {
    histogram: Histogram<u64>,
}

impl Default for Latency {
    fn default() -> Self {
        Self::new()
    }
}

impl Latency {
    /// An empty histogram.
    pub fn new() -> Self {
        // The bounds are constants that `new_with_bounds` accepts (low >= 1,
        // high >= 2 * low, sigfig <= 5), so this cannot fail.
        let histogram = Histogram::new_with_bounds(1, MAX_MICROS, 3)
            .unwrap_or_else(|_| unreachable!("constant histogram bounds are valid"));
        Self { histogram }
    }

    /// Records one request's latency.
    pub fn record(&mut self, latency: Duration) {
        let micros = u64::try_from(latency.as_micros()).unwrap_or(MAX_MICROS);
        self.histogram
            .saturating_record(micros.clamp(1, MAX_MICROS));
    }

    /// Adds another histogram's samples to this one.
    pub fn merge(&mut self, other: &Latency) {
        // Both share the same bounds, so adding cannot fail.
        let _ = self.histogram.add(&other.histogram);
    }

    /// How many samples were recorded.
    pub fn count(&self) -> u64 {
        self.histogram.len()
    }

    /// The summary the report prints.
    pub fn summary(&self) -> LatencySummary {
        let ms = |micros: u64| micros as f64 / 1000.0;
        if self.histogram.is_empty() {
            return LatencySummary::default();
        }
        LatencySummary {
            mean_ms: self.histogram.mean() / 1000.0,
            p50_ms: ms(self.histogram.value_at_quantile(0.50)),
            p90_ms: ms(self.histogram.value_at_quantile(0.90)),
            p99_ms: ms(self.histogram.value_at_quantile(0.99)),
            p999_ms: ms(self.histogram.value_at_quantile(0.999)),
            max_ms: ms(self.histogram.max()),
        }
    }
}

/// Latency percentiles, in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct LatencySummary {
    /// The mean.
    pub mean_ms: f64,
    /// The median.
    pub p50_ms: f64,
    /// The 90th percentile.
    pub p90_ms: f64,
    /// The 99th percentile.
    pub p99_ms: f64,
    /// The 99.9th percentile.
    pub p999_ms: f64,
    /// The slowest request.
    pub max_ms: f64,
}
