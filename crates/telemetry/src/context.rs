//! W3C trace context (`traceparent`, `tracestate`) in and out of the
//! process. Every function does nothing while traces are off
//! ([`crate::enabled`]), so a service without an endpoint parses no header.

use http::{HeaderMap, HeaderName, HeaderValue};
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator as _};
use opentelemetry::trace::TraceContextExt as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// Makes `span` continue the trace of an incoming request's `traceparent`
/// (a new trace when it has none, or one that does not parse), and answers
/// the span's trace id (32 hex digits) for its log lines. `None` when traces
/// are off or `span` is not exported.
pub fn continue_trace(span: &tracing::Span, headers: &HeaderMap) -> Option<String> {
    if !crate::enabled() || span.is_disabled() {
        return None;
    }
    let parent = if well_formed(headers) {
        TraceContextPropagator::new().extract(&Headers(headers))
    } else {
        opentelemetry::Context::new()
    };
    // Fails only for a span the layer does not export; then it has no id.
    span.set_parent(parent).ok()?;
    trace_id(span)
}

/// The trace id of `span` (32 hex digits), if it is exported.
pub fn trace_id(span: &tracing::Span) -> Option<String> {
    if !crate::enabled() {
        return None;
    }
    let context = span.context();
    let span_context = context.span().span_context().clone();
    span_context
        .is_valid()
        .then(|| span_context.trace_id().to_string())
}

/// Adds the current span's `traceparent` (and `tracestate`) to an outgoing
/// request's headers, so the callee can join the caller's trace.
pub fn inject_current(headers: &mut HeaderMap) {
    if !crate::enabled() {
        return;
    }
    let context = tracing::Span::current().context();
    if !context.span().span_context().is_valid() {
        return;
    }
    TraceContextPropagator::new().inject_context(&context, &mut HeadersMut(headers));
}

/// The trace id a `traceparent` header names (32 lowercase hex digits, not
/// all zero), for a callee that records who called it. Whether or not
/// traces are on in this process: the caller's trace is the caller's.
pub fn trace_id_of_traceparent(headers: &HeaderMap) -> Option<String> {
    if !well_formed(headers) {
        return None;
    }
    let context = TraceContextPropagator::new().extract(&Headers(headers));
    let span_context = context.span().span_context().clone();
    span_context
        .is_valid()
        .then(|| span_context.trace_id().to_string())
}

/// Whether the request has exactly one `traceparent` of the W3C form
/// `vv-<32 hex>-<16 hex>-ff` (lowercase). The propagator itself takes
/// shorter ids and pads them; a caller's id is the caller's only as sent.
fn well_formed(headers: &HeaderMap) -> bool {
    let mut values = headers.get_all("traceparent").iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return false;
    };
    let Ok(value) = value.to_str() else {
        return false;
    };
    let parts: Vec<&str> = value.split('-').collect();
    let hex = |part: &str, len: usize| {
        part.len() == len && part.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    };
    parts.len() >= 4
        && hex(parts[0], 2)
        && hex(parts[1], 32)
        && hex(parts[2], 16)
        && hex(parts[3], 2)
}

struct Headers<'a>(&'a HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|value| value.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(HeaderName::as_str).collect()
    }
}

struct HeadersMut<'a>(&'a mut HeaderMap);

impl Injector for HeadersMut<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(key.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            self.0.insert(name, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_traceparent(value: &'static str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert("traceparent", HeaderValue::from_static(value));
        headers
    }

    #[test]
    fn a_traceparent_names_its_trace() {
        let headers = with_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
        assert_eq!(
            trace_id_of_traceparent(&headers).as_deref(),
            Some("4bf92f3577b34da6a3ce929d0e0e4736")
        );
    }

    #[test]
    fn a_malformed_or_zero_traceparent_names_none() {
        for bad in [
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "not a traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e47-00f067aa0ba902b7-01",
        ] {
            assert_eq!(
                trace_id_of_traceparent(&with_traceparent(bad)),
                None,
                "{bad}"
            );
        }
        assert_eq!(trace_id_of_traceparent(&HeaderMap::new()), None);
    }
}
