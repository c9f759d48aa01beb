//! The export queue's bound and its counters.
//!
//! The SDK's batch processor drops spans when its queue is full, but keeps
//! the count to itself. [`Gate`] stands in front of it with the same bound
//! and counts what it turns away; [`CountingExporter`] stands behind it and
//! counts what left the queue (exported, or lost with a failed export). A
//! span is queued from the moment the gate lets it in until its batch's
//! export returns, so the processor's own queue never overflows.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use opentelemetry::Context;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{Span, SpanData, SpanExporter, SpanProcessor};

/// What became of the spans that ended, since the process started.
#[derive(Debug, Clone, Default)]
pub struct SpanCounters(Arc<Counts>);

#[derive(Debug, Default)]
struct Counts {
    queued: AtomicUsize,
    exported: AtomicU64,
    dropped: AtomicU64,
    failed: AtomicU64,
}

impl SpanCounters {
    /// Spans the endpoint accepted.
    pub fn exported(&self) -> u64 {
        self.0.exported.load(Ordering::Relaxed)
    }

    /// Spans dropped because the queue was full (the endpoint down or too
    /// slow for the load).
    pub fn dropped(&self) -> u64 {
        self.0.dropped.load(Ordering::Relaxed)
    }

    /// Spans lost with an export that failed (refused, unreachable, or past
    /// the export timeout).
    pub fn failed(&self) -> u64 {
        self.0.failed.load(Ordering::Relaxed)
    }

    /// Spans in the queue now.
    pub fn queued(&self) -> usize {
        self.0.queued.load(Ordering::Relaxed)
    }

    /// Lets a span in if fewer than `bound` are queued.
    fn admit(&self, bound: usize) -> bool {
        let admitted = self
            .0
            .queued
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |queued| {
                (queued < bound).then_some(queued + 1)
            })
            .is_ok();
        if !admitted {
            self.0.dropped.fetch_add(1, Ordering::Relaxed);
        }
        admitted
    }

    /// A batch of `spans` left the queue, exported or not.
    fn left(&self, spans: usize, exported: bool) {
        self.0.queued.fetch_sub(spans, Ordering::AcqRel);
        let counter = if exported {
            &self.0.exported
        } else {
            &self.0.failed
        };
        counter.fetch_add(spans as u64, Ordering::Relaxed);
    }
}

/// A processor that lets at most `bound` spans into `next` at a time and
/// drops (and counts) the rest, never blocking the thread that ended a span.
#[derive(Debug)]
pub struct Gate<P> {
    next: P,
    bound: usize,
    counters: SpanCounters,
}

impl<P> Gate<P> {
    /// A gate of `bound` spans in front of `next`, counting in `counters`
    /// (the same as the exporter's behind `next`).
    pub fn new(next: P, bound: usize, counters: SpanCounters) -> Self {
        Self {
            next,
            bound,
            counters,
        }
    }
}

impl<P: SpanProcessor> SpanProcessor for Gate<P> {
    fn on_start(&self, span: &mut Span, cx: &Context) {
        self.next.on_start(span, cx);
    }

    fn on_end(&self, span: SpanData) {
        if self.counters.admit(self.bound) {
            self.next.on_end(span);
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.next.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.next.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.next.set_resource(resource);
    }
}

/// An exporter that counts each batch as it leaves the queue.
#[derive(Debug)]
pub struct CountingExporter<E> {
    inner: E,
    counters: SpanCounters,
}

impl<E> CountingExporter<E> {
    /// Counts `inner`'s exports in `counters`.
    pub fn new(inner: E, counters: SpanCounters) -> Self {
        Self { inner, counters }
    }
}

impl<E: SpanExporter> SpanExporter for CountingExporter<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let spans = batch.len();
        let result = self.inner.export(batch).await;
        self.counters.left(spans, result.is_ok());
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gate_admits_up_to_its_bound_and_counts_the_rest() {
        let counters = SpanCounters::default();
        assert!(counters.admit(2));
        assert!(counters.admit(2));
        assert!(!counters.admit(2));
        assert_eq!((counters.queued(), counters.dropped()), (2, 1));
        counters.left(1, true);
        assert!(counters.admit(2));
        counters.left(2, false);
        assert_eq!(
            (counters.queued(), counters.exported(), counters.failed()),
            (0, 1, 2)
        );
    }
}
