//! The report: tallies merged from every worker, the figures derived from
//! them, and their text and JSON forms.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

use chargeonce_prooftools::histogram::{Latency, LatencySummary};

/// How many violation messages a report keeps (all are counted).
pub const VIOLATION_SAMPLES: usize = 20;

/// What one worker (or the whole run, once merged) saw.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    /// Latency of every measured request.
    pub latency: Latency,
    /// Answers by HTTP status.
    pub statuses: BTreeMap<u16, u64>,
    /// Answers that carried `Idempotent-Replayed: true`.
    pub replayed: u64,
    /// Requests that got no HTTP answer (connection error, timeout).
    pub transport_errors: u64,
    /// Answers with a 5xx status.
    pub server_errors: u64,
    /// First executions: 201 answers without `Idempotent-Replayed`.
    pub executions: u64,
    /// Broken exactly-once or replay rules, counted.
    pub violations: u64,
    /// The first few violations, described.
    pub violation_samples: Vec<String>,
    /// Order references whose payment this run saw executed (for the ledger check).
    pub executed_references: Vec<String>,
    /// Storm only: keys stormed and the most executions one key got.
    pub storm_keys: u64,
    /// Storm only: the most first executions any one key got.
    pub storm_max_executions: u64,
}

impl Tally {
    /// Counts one answer's status (and replay flag) and records its latency.
    pub fn answer(&mut self, status: u16, replayed: bool, latency: Duration) {
        self.latency.record(latency);
        *self.statuses.entry(status).or_default() += 1;
        if replayed {
            self.replayed += 1;
        }
        if status >= 500 {
            self.server_errors += 1;
        }
    }

    /// Counts a request that got no answer.
    pub fn transport_error(&mut self, error: &reqwest::Error) {
        self.transport_errors += 1;
        if self.transport_errors == 1 {
            self.violation_note(format!("no answer: {error}"));
        }
    }

    /// Records a broken rule.
    pub fn violation(&mut self, what: String) {
        self.violations += 1;
        self.violation_note(what);
    }

    fn violation_note(&mut self, what: String) {
        if self.violation_samples.len() < VIOLATION_SAMPLES {
            self.violation_samples.push(what);
        }
    }

    /// How many answers (of any status) came back.
    pub fn answers(&self) -> u64 {
        self.statuses.values().sum()
    }

    /// Adds another tally to this one.
    pub fn merge(&mut self, other: Tally) {
        self.latency.merge(&other.latency);
        for (status, count) in other.statuses {
            *self.statuses.entry(status).or_default() += count;
        }
        self.replayed += other.replayed;
        self.transport_errors += other.transport_errors;
        self.server_errors += other.server_errors;
        self.executions += other.executions;
        self.violations += other.violations;
        for sample in other.violation_samples {
            self.violation_note(sample);
        }
        self.executed_references.extend(other.executed_references);
        self.storm_keys += other.storm_keys;
        self.storm_max_executions = self.storm_max_executions.max(other.storm_max_executions);
    }
}

/// Storm figures: executions against requests.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StormReport {
    /// Duplicates sent at once per key.
    pub duplicates: usize,
    /// Keys stormed.
    pub keys: u64,
    /// Requests sent (every key's duplicates).
    pub requests: u64,
    /// First executions seen (exactly one per key when correct).
    pub executions: u64,
    /// The most first executions one key got (1 when correct).
    pub max_executions_per_key: u64,
}

/// The acquirer ledger against the executions this run saw.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct LedgerReport {
    /// Charges in the ledger for this run's orders.
    pub charges: u64,
    /// Orders charged more than once (must be 0).
    pub charged_twice: u64,
    /// Orders answered 201 whose charge is not in the ledger (must be 0).
    pub missing: u64,
    /// Orders charged whose 201 this run did not see (a request that got no
    /// answer, for example): reported, not a violation.
    pub unseen: u64,
}

/// The whole run's figures.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Report {
    /// The scenario's name.
    pub scenario: String,
    /// The base URL measured.
    pub target: String,
    /// Concurrent requests (closed loop) or duplicates per key (storm).
    pub connections: usize,
    /// Measured wall time, seconds.
    pub duration_s: f64,
    /// Answers received plus requests that got none.
    pub requests: u64,
    /// `requests / duration_s`.
    pub requests_per_s: f64,
    /// First executions (201, not replayed).
    pub executions: u64,
    /// `executions / duration_s`: payments per second.
    pub executions_per_s: f64,
    /// Latency percentiles over every answer.
    pub latency: LatencySummary,
    /// Answers by status code.
    pub statuses: BTreeMap<String, u64>,
    /// Answers with `Idempotent-Replayed: true`.
    pub replayed: u64,
    /// Requests with no answer.
    pub transport_errors: u64,
    /// 5xx answers.
    pub server_errors: u64,
    /// Storm figures (storm only).
    pub storm: Option<StormReport>,
    /// The ledger check (when the target exposes `GET /sim/ledger`).
    pub ledger: Option<LedgerReport>,
    /// The unauthenticated flood beside the scenario (`--flood`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flood: Option<crate::flood::FloodReport>,
    /// Broken rules, counted.
    pub violations: u64,
    /// The first broken rules, described.
    pub violation_samples: Vec<String>,
    /// No violation, no 5xx, no request without an answer.
    pub passed: bool,
}

/// Answers by status as `201: 10, 409: 2`, or `none`.
fn by_status(statuses: &BTreeMap<String, u64>) -> String {
    if statuses.is_empty() {
        return "none".to_owned();
    }
    let parts: Vec<String> = statuses
        .iter()
        .map(|(status, count)| format!("{status}: {count}"))
        .collect();
    parts.join(", ")
}

/// `count / seconds`, 0 when no time passed.
pub fn per_second(count: u64, elapsed: Duration) -> f64 {
    let seconds = elapsed.as_secs_f64();
    if seconds > 0.0 {
        count as f64 / seconds
    } else {
        0.0
    }
}

impl Report {
    /// The figures of a merged tally over `elapsed`.
    pub fn new(
        scenario: &str,
        target: &str,
        connections: usize,
        elapsed: Duration,
        tally: &Tally,
        ledger: Option<LedgerReport>,
        storm_duplicates: Option<usize>,
    ) -> Self {
        let requests = tally.answers() + tally.transport_errors;
        let storm = storm_duplicates.map(|duplicates| StormReport {
            duplicates,
            keys: tally.storm_keys,
            requests,
            executions: tally.executions,
            max_executions_per_key: tally.storm_max_executions,
        });
        let passed =
            tally.violations == 0 && tally.server_errors == 0 && tally.transport_errors == 0;
        Self {
            scenario: scenario.to_owned(),
            target: target.to_owned(),
            connections,
            duration_s: elapsed.as_secs_f64(),
            requests,
            requests_per_s: per_second(requests, elapsed),
            executions: tally.executions,
            executions_per_s: per_second(tally.executions, elapsed),
            latency: tally.latency.summary(),
            statuses: tally
                .statuses
                .iter()
                .map(|(status, count)| (status.to_string(), *count))
                .collect(),
            replayed: tally.replayed,
            transport_errors: tally.transport_errors,
            server_errors: tally.server_errors,
            storm,
            ledger,
            flood: None,
            violations: tally.violations,
            violation_samples: tally.violation_samples.clone(),
            passed,
        }
    }

    /// Adds the flood's report: a flood answered 5xx (or not at all) fails
    /// the run, as the scenario's own would.
    pub fn with_flood(mut self, flood: Option<crate::flood::FloodReport>) -> Self {
        if flood.as_ref().is_some_and(|f| f.failures > 0) {
            self.passed = false;
        }
        self.flood = flood;
        self
    }

    /// The JSON form (one object, pretty-printed).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// The text form, a few aligned lines.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let l = &self.latency;
        let _ = writeln!(
            out,
            "chargeonce bench {} against {} ({} connections, {:.1} s)",
            self.scenario, self.target, self.connections, self.duration_s
        );
        let _ = writeln!(
            out,
            "  requests    {:>9}  {:>10.1} req/s",
            self.requests, self.requests_per_s
        );
        let _ = writeln!(
            out,
            "  executions  {:>9}  {:>10.1} payments/s",
            self.executions, self.executions_per_s
        );
        let _ = writeln!(
            out,
            "  latency ms  p50 {:.2}  p90 {:.2}  p99 {:.2}  p99.9 {:.2}  max {:.2}  (mean {:.2})",
            l.p50_ms, l.p90_ms, l.p99_ms, l.p999_ms, l.max_ms, l.mean_ms
        );
        let _ = writeln!(
            out,
            "  answers     {}  (replayed: {}, no answer: {})",
            by_status(&self.statuses),
            self.replayed,
            self.transport_errors
        );
        if let Some(flood) = &self.flood {
            let _ = writeln!(
                out,
                "  flood       {} unauthenticated requests beside it  ({}; failures: {})",
                flood.requests,
                by_status(&flood.statuses),
                flood.failures
            );
        }
        if let Some(storm) = &self.storm {
            let _ = writeln!(
                out,
                "  storm       {} keys x {} duplicates = {} requests -> {} executions (most per key: {})",
                storm.keys,
                storm.duplicates,
                storm.requests,
                storm.executions,
                storm.max_executions_per_key
            );
        }
        match &self.ledger {
            Some(ledger) => {
                let _ = writeln!(
                    out,
                    "  ledger      {} charges: {} orders charged twice, {} missing, {} charged without a 201 seen",
                    ledger.charges, ledger.charged_twice, ledger.missing, ledger.unseen
                );
            }
            None => {
                let _ = writeln!(out, "  ledger      not checked");
            }
        }
        if self.passed {
            let _ = writeln!(out, "  result      PASS");
        } else {
            let _ = writeln!(
                out,
                "  result      FAIL: {} violations, {} 5xx, {} without answer",
                self.violations, self.server_errors, self.transport_errors
            );
            for sample in &self.violation_samples {
                let _ = writeln!(out, "    - {sample}");
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_from_a_tally() {
        let mut tally = Tally::default();
        for ms in 1..=100u64 {
            tally.answer(201, false, Duration::from_millis(ms));
        }
        tally.executions = 100;
        let mut other = Tally::default();
        other.answer(201, true, Duration::from_millis(1000));
        other.answer(409, false, Duration::from_millis(1));
        tally.merge(other);
        let report = Report::new(
            "fresh",
            "http://x",
            4,
            Duration::from_secs(2),
            &tally,
            None,
            None,
        );
        assert_eq!(report.requests, 102);
        assert!((report.requests_per_s - 51.0).abs() < 1e-9);
        assert!((report.executions_per_s - 50.0).abs() < 1e-9);
        assert_eq!(report.statuses["201"], 101);
        assert_eq!(report.statuses["409"], 1);
        assert_eq!(report.replayed, 1);
        // 102 samples: 1, 1, 2, ..., 100, 1000 ms; HDR keeps 3 significant digits.
        assert!(
            (report.latency.p50_ms - 50.0).abs() < 0.1,
            "{:?}",
            report.latency
        );
        assert!(
            (report.latency.p99_ms - 100.0).abs() < 0.1,
            "{:?}",
            report.latency
        );
        assert!(
            (report.latency.p90_ms - 91.0).abs() < 0.1,
            "{:?}",
            report.latency
        );
        assert!(
            (report.latency.max_ms - 1000.0).abs() < 1.0,
            "{:?}",
            report.latency
        );
        assert!(report.passed);
        assert!(report.to_text().contains("PASS"));
        let json: serde_json::Value = serde_json::from_str(&report.to_json()).expect("json");
        assert_eq!(json["executions"], 100);
    }

    #[test]
    fn a_violation_or_a_5xx_fails_the_run() {
        let mut tally = Tally::default();
        tally.answer(503, false, Duration::from_millis(1));
        let report = Report::new("fresh", "t", 1, Duration::ZERO, &tally, None, None);
        assert!(!report.passed);
        assert_eq!(report.requests_per_s, 0.0);
        let mut tally = Tally::default();
        tally.violation("key k executed 2 times".into());
        let report = Report::new(
            "storm",
            "t",
            1,
            Duration::from_secs(1),
            &tally,
            None,
            Some(2),
        );
        assert!(!report.passed);
        assert!(report.to_text().contains("key k executed 2 times"));
    }
}
