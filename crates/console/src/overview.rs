//! The overview: this instance's counters over the last minutes (payments
//! claimed, replays, 409s, 422s, take-overs) and the store's counts
//! (pending payments, open findings, undelivered events), as small charts.
//!
//! A sampler reads the counters and the counts every
//! [`SAMPLE_EVERY`] into a ring buffer of [`SAMPLES_KEPT`] samples; the
//! page draws them as inline SVG sparklines, and `console.js` redraws them
//! from `GET /console/api/overview` every few seconds. The counters are
//! this instance's (each instance charts its own traffic); the counts are
//! the store's, the same on every instance.

use std::collections::VecDeque;
use std::sync::{Arc, Weak};
use std::time::Duration;

use askama::Template;
use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use chargeonce_core::store::StoreCounts;
use chargeonce_core::{Chain, Store};
use serde_json::{Value, json};
use time::OffsetDateTime;

use super::{Chrome, ConsoleError, ConsoleState, Operator, html};
use chargeonce_server::Metrics;
use chargeonce_server::metrics::Counters;

use crate::Console;

/// How often the sampler reads.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(5);

/// How many samples are kept (10 minutes at one every 5 s).
pub const SAMPLES_KEPT: usize = 120;

/// The charts, by name, with their caption: the first five are deltas of
/// this instance's counters per sample, the last two the store's levels.
pub const CHARTS: [(&str, &str); 7] = [
    ("payments", "keys claimed (payments and refunds started)"),
    ("replays", "stored answers replayed"),
    ("conflicts", "409: first request still running"),
    ("mismatches", "422: key reused for another request"),
    ("takeovers", "expired leases taken over"),
    ("pending", "payments pending (store)"),
    ("findings", "open findings (store)"),
];

/// One reading.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// When.
    pub at: OffsetDateTime,
    /// The counters' running totals.
    pub counters: Counters,
    /// The store's counts, when it answered.
    pub counts: Option<StoreCounts>,
}

/// The ring buffer of samples.
#[derive(Debug, Default)]
pub struct Samples {
    samples: VecDeque<Sample>,
}

impl Samples {
    /// Adds a reading, forgetting the oldest past [`SAMPLES_KEPT`].
    pub fn push(&mut self, sample: Sample) {
        self.samples.push_back(sample);
        while self.samples.len() > SAMPLES_KEPT + 1 {
            self.samples.pop_front();
        }
    }

    /// One chart's series: per-sample deltas for the counters, levels for
    /// the store's counts (0 where it did not answer).
    pub fn series(&self, name: &str) -> Vec<u64> {
        let samples: Vec<&Sample> = self.samples.iter().collect();
        let level = |s: &Sample| match (name, s.counts) {
            ("pending", Some(c)) => c.pending_payments,
            ("findings", Some(c)) => c.open_findings,
            _ => 0,
        };
        if matches!(name, "pending" | "findings") {
            return samples.iter().skip(1).map(|s| level(s)).collect();
        }
        let total = |s: &Sample| match name {
            "payments" => s.counters.claims,
            "replays" => s.counters.replays,
            "conflicts" => s.counters.conflicts,
            "mismatches" => s.counters.mismatches,
            "takeovers" => s.counters.takeovers,
            _ => 0,
        };
        samples
            .windows(2)
            .map(|pair| total(pair[1]).saturating_sub(total(pair[0])))
            .collect()
    }

    /// The latest store counts read.
    pub fn latest_counts(&self) -> Option<StoreCounts> {
        self.samples.iter().rev().find_map(|s| s.counts)
    }

    /// How many samples there are.
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// Whether there is none yet.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }
}

/// Takes one sample now.
async fn sample(console: &ConsoleState, metrics: &Metrics, store: &dyn Store) {
    let counts = store.counts().await.ok();
    let sample = Sample {
        at: OffsetDateTime::now_utc(),
        counters: metrics.counters(),
        counts,
    };
    console
        .samples
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push(sample);
}

/// Starts the sampler (when inside a Tokio runtime). It holds only weak
/// references, so it stops once the server's state is gone (and never keeps
/// a store's connections open).
pub fn start_sampler(state: &Console) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let console: Weak<ConsoleState> = Arc::downgrade(&state.console);
    let metrics: Weak<Metrics> = Arc::downgrade(state.shared_metrics());
    let store: Weak<dyn Store> = Arc::downgrade(state.store());
    runtime.spawn(async move {
        let mut ticks = tokio::time::interval(SAMPLE_EVERY);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let (Some(console), Some(metrics), Some(store)) =
                (console.upgrade(), metrics.upgrade(), store.upgrade())
            else {
                return;
            };
            sample(&console, &metrics, store.as_ref()).await;
        }
    });
}

/// A chart on the page.
pub struct Chart {
    /// Its name (`svg[data-testid=chart-<name>]`).
    pub name: &'static str,
    /// What it counts.
    pub caption: &'static str,
    /// The polyline's points, drawn server-side (the script redraws them).
    pub points: String,
    /// The last value.
    pub last: u64,
    /// The highest value shown.
    pub max: u64,
}

/// Chart width and height in SVG units.
const WIDTH: u64 = 240;
const HEIGHT: u64 = 48;

/// The points of a sparkline of `values` in a `WIDTH` x `HEIGHT` box.
pub fn points(values: &[u64]) -> String {
    // Inside a 2-unit margin, so the line at zero is not clipped.
    let bottom = HEIGHT - 2;
    if values.is_empty() {
        return format!("0,{bottom} {WIDTH},{bottom}");
    }
    let max = values.iter().copied().max().unwrap_or(0).max(1);
    let n = values.len().max(2) - 1;
    values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let x = (i as u64) * WIDTH / n as u64;
            let y = bottom - v * (HEIGHT - 4) / max;
            format!("{x},{y}")
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The overview page.
#[derive(Template)]
#[template(path = "console/overview.html")]
struct OverviewPage {
    page: Chrome,
    charts: Vec<Chart>,
    counts: Option<StoreCounts>,
    sessions: usize,
}

/// `GET /console`.
pub async fn page(
    State(state): State<Console>,
    operator: Operator,
) -> Result<Response, ConsoleError> {
    // The page shows even when the store does not answer (then without
    // its counts): it is where an operator looks when things go wrong.
    let counts = match state.store().counts().await {
        Ok(counts) => Some(counts),
        Err(error) => {
            tracing::warn!(error = %Chain(&error), "console overview: the store's counts");
            None
        }
    };
    let charts = {
        let samples = state
            .console
            .samples
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        CHARTS
            .iter()
            .map(|(name, caption)| {
                let series = samples.series(name);
                Chart {
                    name,
                    caption,
                    points: points(&series),
                    last: series.last().copied().unwrap_or(0),
                    max: series.iter().copied().max().unwrap_or(0),
                }
            })
            .collect()
    };
    html(&OverviewPage {
        page: Chrome::new(&operator, "Overview", "overview"),
        charts,
        counts,
        sessions: state.console.sessions.len(),
    })
}

/// The overview as JSON: `{"series": {name: [...]}, "counts": {...}}`
/// (`counts` null when the store did not answer).
pub fn overview_json(samples: &Samples, counts: Option<StoreCounts>) -> Value {
    let series: serde_json::Map<String, Value> = CHARTS
        .iter()
        .map(|(name, _)| ((*name).to_owned(), json!(samples.series(name))))
        .collect();
    json!({
        "interval_seconds": SAMPLE_EVERY.as_secs(),
        "series": series,
        "counts": counts.map(|counts| json!({
            "pending_payments": counts.pending_payments,
            "open_findings": counts.open_findings,
            "undelivered_events": counts.undelivered_events,
        })),
    })
}

/// `GET /console/api/overview`.
pub async fn json(State(state): State<Console>, _operator: Operator) -> Response {
    let counts = state.store().counts().await.ok();
    let samples = state
        .console
        .samples
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    Json(overview_json(&samples, counts)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(claims: u64, pending: u64) -> Sample {
        Sample {
            at: OffsetDateTime::UNIX_EPOCH,
            counters: Counters {
                claims,
                ..Counters::default()
            },
            counts: Some(StoreCounts {
                pending_payments: pending,
                ..StoreCounts::default()
            }),
        }
    }

    #[test]
    fn counters_chart_as_deltas_and_counts_as_levels() {
        let mut samples = Samples::default();
        for (claims, pending) in [(0, 0), (3, 1), (3, 2), (10, 0)] {
            samples.push(at(claims, pending));
        }
        assert_eq!(samples.series("payments"), [3, 0, 7]);
        assert_eq!(samples.series("pending"), [1, 2, 0]);
        assert_eq!(samples.series("replays"), [0, 0, 0]);
        for i in 0..200 {
            samples.push(at(i, 0));
        }
        assert_eq!(samples.series("payments").len(), SAMPLES_KEPT);
        assert_eq!(points(&[]), "0,46 240,46");
        assert_eq!(points(&[0, 1]), "0,46 240,2");
    }
}
