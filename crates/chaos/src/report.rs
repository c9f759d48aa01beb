//! The report of a run: what was done to the system, what the clients saw,
//! and the violations, as text and as JSON.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use chargeonce_bench::histogram::{Latency, LatencySummary};
use serde::Serialize;

use crate::args::Sabotage;
use crate::checker::Violation;
use crate::history::{CallKind, CallRecord};
use crate::nemesis::NemesisLog;

/// Percentiles of `samples` (the load generator's HDR histogram).
fn latency(samples: impl Iterator<Item = Duration>) -> LatencySummary {
    let mut histogram = Latency::new();
    for sample in samples {
        histogram.record(sample);
    }
    histogram.summary()
}

/// What the proxies did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ProxyFigures {
    /// Client connections.
    pub connections: u64,
    /// Delayed.
    pub delayed: u64,
    /// Reset before forwarding.
    pub reset: u64,
    /// Answers dropped after the request was forwarded.
    pub answers_dropped: u64,
    /// `502` while the instance was down.
    pub instance_down: u64,
}

/// What the database and the ledger held at the end.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Books {
    /// Payments succeeded.
    pub payments_succeeded: usize,
    /// Payments declined.
    pub payments_declined: usize,
    /// Payments still pending (must be 0).
    pub payments_pending: usize,
    /// Charge attempts in the ledger.
    pub ledger_charges: usize,
    /// Of which succeeded.
    pub ledger_succeeded: usize,
    /// Refunds in the ledger.
    pub ledger_refunds: usize,
    /// Money moved, in minor units.
    pub ledger_total_minor: i128,
    /// Entries in the payments' histories.
    pub history_entries: usize,
    /// Payments whose history has an entry.
    pub payments_with_history: usize,
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Every random choice came from it.
    pub seed: u64,
    /// The command that repeats the run.
    pub repeat: String,
    /// The component broken on purpose, if any.
    pub sabotage: Sabotage,
    /// Service instances.
    pub instances: usize,
    /// Concurrent clients.
    pub clients: usize,
    /// Shops.
    pub shops: usize,
    /// Payment intents.
    pub intents: usize,
    /// What the clients did and saw.
    #[serde(flatten)]
    pub history: HistoryFigures,
    /// The proxies.
    pub proxy: ProxyFigures,
    /// The nemesis.
    pub nemesis: NemesisLog,
    /// Writes fenced off (an instance that lost its lease, frozen or slow,
    /// tried to write its result): counted from the instances' logs.
    pub fenced_finishes: usize,
    /// The books at the end.
    pub books: Books,
    /// Seconds of load.
    pub run_seconds: f64,
    /// Seconds the workers took to settle everything after the faults stopped.
    pub settle_seconds: f64,
    /// How many invariants broke, by invariant.
    pub violations_by_invariant: BTreeMap<String, usize>,
    /// The violations (the first 200).
    pub violations: Vec<Violation>,
    /// How many violations in all.
    pub violation_count: usize,
    /// No violation.
    pub passed: bool,
}

/// Figures computed from the history.
#[derive(Debug, Clone, Default, Serialize)]
pub struct HistoryFigures {
    /// SDK calls (retries inside a call not counted).
    pub calls: usize,
    /// HTTP requests sent (every attempt; a refused call counts none).
    pub requests: usize,
    /// Calls that repeated an earlier one (double clicks, late repeats,
    /// changed bodies, comebacks after an uncertain call).
    pub duplicates_sent: usize,
    /// Attempts that got no answer after sending (timeout or lost answer).
    pub answers_lost: usize,
    /// Calls by how they ended (`paid`, `declined`, `uncertain`, ...).
    pub outcomes: BTreeMap<String, usize>,
    /// Calls by verdict, Jepsen style (`ok`, `fail`, `info`).
    pub verdicts: BTreeMap<String, usize>,
    /// Attempts by HTTP status (`503` during the PostgreSQL restart, `502`
    /// from a proxy whose instance was down), or by failure (`lost`, `timeout`,
    /// `connect`).
    pub answers: BTreeMap<String, usize>,
    /// Per SDK call, retries included.
    pub call_latency: LatencySummary,
    /// Per HTTP attempt.
    pub attempt_latency: LatencySummary,
}

impl HistoryFigures {
    /// Sums up a history.
    pub fn of(calls: &[CallRecord]) -> Self {
        let mut outcomes = BTreeMap::new();
        let mut verdicts = BTreeMap::new();
        let mut seen_pay = std::collections::HashSet::new();
        let mut duplicates_sent = 0;
        for call in calls {
            let name = serde_json::to_value(&call.result)
                .ok()
                .and_then(|v| v.get("type").and_then(|t| t.as_str().map(str::to_owned)))
                .unwrap_or_default();
            *outcomes.entry(name).or_insert(0) += 1;
            *verdicts
                .entry(call.result.verdict().to_owned())
                .or_insert(0) += 1;
            let repeat = match call.kind {
                CallKind::Pay => !seen_pay.insert(call.intent),
                CallKind::Refund(_) => false,
                _ => true,
            };
            duplicates_sent += usize::from(repeat);
        }
        let mut answers = BTreeMap::new();
        for attempt in calls.iter().flat_map(|c| &c.attempts) {
            let name = match (attempt.status, attempt.failure) {
                (Some(status), _) => status.to_string(),
                (None, Some(kind)) => format!("{kind:?}").to_lowercase(),
                (None, None) => "none".to_owned(),
            };
            *answers.entry(name).or_insert(0) += 1;
        }
        Self {
            answers,
            calls: calls.len(),
            requests: calls.iter().map(|c| c.attempts.len()).sum(),
            duplicates_sent,
            answers_lost: calls
                .iter()
                .flat_map(|c| &c.attempts)
                .filter(|a| a.is_unknown())
                .count(),
            outcomes,
            verdicts,
            call_latency: latency(calls.iter().map(|c| c.took)),
            attempt_latency: latency(calls.iter().flat_map(|c| &c.attempts).map(|a| a.took)),
        }
    }
}

impl Report {
    /// The report as text.
    pub fn text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "chargeonce chaos — seed {}", self.seed);
        let _ = writeln!(
            s,
            "  {} intents, {} clients, {} instances, {} shops{}",
            self.intents,
            self.clients,
            self.instances,
            self.shops,
            match self.sabotage {
                Sabotage::None => String::new(),
                other => format!(", SABOTAGE {other:?}"),
            }
        );
        let _ = writeln!(
            s,
            "  calls {}  requests {}  duplicates sent {}  answers lost {}",
            self.history.calls,
            self.history.requests,
            self.history.duplicates_sent,
            self.history.answers_lost
        );
        let h = &self.history;
        for (name, counts) in [
            ("outcomes", &h.outcomes),
            ("verdicts", &h.verdicts),
            ("answers", &h.answers),
        ] {
            let parts: Vec<String> = counts.iter().map(|(k, v)| format!("{k} {v}")).collect();
            let _ = writeln!(s, "  {name}: {}", parts.join(", "));
        }
        let p = &self.proxy;
        let _ = writeln!(
            s,
            "  proxy: {} connections, {} delayed, {} reset, {} answers dropped, {} while an instance was down",
            p.connections, p.delayed, p.reset, p.answers_dropped, p.instance_down
        );
        let n = &self.nemesis;
        let _ = writeln!(
            s,
            "  nemesis: {} kills ({} between the acquirer's commit and ours, {} missed), {} restarts, {} freezes, {} PostgreSQL restarts {:?} ms",
            n.kills,
            n.commit_window_kills,
            n.commit_window_missed,
            n.restarts,
            n.freezes,
            n.pg_restarts,
            n.pg_outage_ms
        );
        if n.pg_failovers > 0 {
            let _ = writeln!(
                s,
                "  failovers: {} PostgreSQL leaders killed; kill to first write {:?} ms",
                n.pg_failovers, n.pg_failover_ms
            );
        }
        let _ = writeln!(
            s,
            "  fencing: {} writes of instances that had lost their lease were fenced off",
            self.fenced_finishes
        );
        let _ = writeln!(
            s,
            "  latency per call p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms; per attempt p50 {:.1} ms, p99 {:.1} ms",
            self.history.call_latency.p50_ms,
            self.history.call_latency.p99_ms,
            self.history.call_latency.max_ms,
            self.history.attempt_latency.p50_ms,
            self.history.attempt_latency.p99_ms
        );
        let b = &self.books;
        let _ = writeln!(
            s,
            "  books: payments {} succeeded, {} declined, {} pending; ledger {} charges ({} succeeded), {} refunds, {} minor units moved",
            b.payments_succeeded,
            b.payments_declined,
            b.payments_pending,
            b.ledger_charges,
            b.ledger_succeeded,
            b.ledger_refunds,
            b.ledger_total_minor
        );
        let settlement = self
            .violations_by_invariant
            .get("history-has-one-settlement")
            .copied()
            .unwrap_or(0);
        let _ = writeln!(
            s,
            "  histories: {} entries for {} payments; history-has-one-settlement: {}",
            b.history_entries,
            b.payments_with_history,
            if settlement == 0 {
                "every final payment settled once".to_owned()
            } else {
                format!("{settlement} violation(s)")
            }
        );
        let _ = writeln!(
            s,
            "  load {:.1} s, settled in {:.1} s",
            self.run_seconds, self.settle_seconds
        );
        if self.passed {
            let _ = writeln!(s, "PASSED: no violation of the money invariants");
        } else {
            let _ = writeln!(s, "FAILED: {} violation(s)", self.violation_count);
            for (invariant, count) in &self.violations_by_invariant {
                let _ = writeln!(s, "  {invariant}: {count}");
            }
            for v in self.violations.iter().take(20) {
                let _ = writeln!(s, "  - [{}] {}", v.invariant, v.detail);
            }
        }
        let _ = writeln!(s, "repeat with: {}", self.repeat);
        s
    }
}
