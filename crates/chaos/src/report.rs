//! The report of a run: what was done to the system, what the clients saw,
//! and the violations, as text and as JSON.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use chargeonce_prooftools::histogram::{Latency, LatencySummary};
use serde::Serialize;

use crate::args::{Sabotage, StoreKind};
use crate::checker::Violation;
use crate::history::{AttemptRecord, CallKind, CallRecord};
use crate::nemesis::NemesisLog;
use crate::pglog::LogFigures;
use crate::truth::Books;

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

/// One leader failover, as the clients lived through it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FailoverFigures {
    /// From the SIGKILL of the leader to the first write committed through
    /// HAProxy, in milliseconds.
    pub kill_to_first_write_ms: u64,
    /// Attempts under way during that window (sent before its end, ended
    /// after its start).
    pub requests: usize,
    /// Of those, the attempts that failed, by answer (`503`, `502`, `lost`,
    /// `timeout`, ...): what the switch cost the clients.
    pub failed: BTreeMap<String, usize>,
}

impl FailoverFigures {
    /// The figures of each failover window, from every attempt of the run.
    pub fn of(log: &NemesisLog, calls: &[CallRecord]) -> Vec<Self> {
        let attempts: Vec<&AttemptRecord> = calls.iter().flat_map(|c| &c.attempts).collect();
        log.pg_failover_kills
            .iter()
            .zip(&log.pg_failover_ms)
            .map(|(&from, &ms)| {
                let to = from + Duration::from_millis(ms);
                let during = attempts
                    .iter()
                    .filter(|a| a.sent_at <= to && a.ended_at() >= from);
                let mut figures = Self {
                    kill_to_first_write_ms: ms,
                    ..Self::default()
                };
                for attempt in during {
                    figures.requests += 1;
                    if attempt.failed() {
                        *figures.failed.entry(attempt.answer_name()).or_insert(0) += 1;
                    }
                }
                figures
            })
            .collect()
    }

    /// How many attempts failed in the window.
    pub fn failed_total(&self) -> usize {
        self.failed.values().sum()
    }
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
    /// The store the instances kept their books in.
    pub store: StoreKind,
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
    /// Each leader failover: its outage and the requests that failed in it.
    pub failovers: Vec<FailoverFigures>,
    /// PostgreSQL's warnings and errors that the service caused, from the
    /// run's own cluster's log ([`crate::pglog`]).
    pub postgres_log: LogFigures,
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
                CallKind::Refund(_) | CallKind::Cancel => false,
                _ => true,
            };
            duplicates_sent += usize::from(repeat);
        }
        let mut answers = BTreeMap::new();
        for attempt in calls.iter().flat_map(|c| &c.attempts) {
            *answers.entry(attempt.answer_name()).or_insert(0) += 1;
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
    /// What PostgreSQL's log said, in a line.
    fn postgres_log_line(&self) -> String {
        let log = &self.postgres_log;
        if self.store == StoreKind::Sqlite {
            return "none (the store is an SQLite file)".to_owned();
        }
        if !log.read {
            return "not read (only the run's own cluster's log is at hand)".to_owned();
        }
        let mut line = format!(
            "{} warnings or errors caused by the service ({} allowed)",
            log.total(),
            log.allowed
        );
        for (message, count) in &log.by_message {
            let _ = write!(line, "; {count} x {message}");
        }
        line
    }

    /// The report as text.
    pub fn text(&self) -> String {
        let mut s = String::new();
        self.write_run(&mut s);
        self.write_faults(&mut s);
        self.write_books(&mut s);
        self.write_verdict(&mut s);
        s
    }

    /// The run's shape and what the clients sent and got.
    fn write_run(&self, s: &mut String) {
        let _ = writeln!(s, "chargeonce chaos — seed {}", self.seed);
        let _ = writeln!(
            s,
            "  {} intents, {} clients, {} instances, {} shops, store {}{}",
            self.intents,
            self.clients,
            self.instances,
            self.shops,
            match self.store {
                StoreKind::Postgres => "PostgreSQL",
                StoreKind::Sqlite => "SQLite",
            },
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
    }

    /// The faults injected: the proxy's, the nemesis's, the failovers, and
    /// what they caused (fenced writes, PostgreSQL's log).
    fn write_faults(&self, s: &mut String) {
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
        for (i, f) in self.failovers.iter().enumerate() {
            let parts: Vec<String> = f.failed.iter().map(|(k, v)| format!("{k} {v}")).collect();
            let _ = writeln!(
                s,
                "    failover {}: kill to first write {} ms; {} of {} requests under way failed{}",
                i + 1,
                f.kill_to_first_write_ms,
                f.failed_total(),
                f.requests,
                if parts.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", parts.join(", "))
                }
            );
        }
        for (i, f) in n.pg_leader_freezes.iter().enumerate() {
            let _ = writeln!(s, "  leader freeze {}: {f}", i + 1);
        }
        for (i, k) in n.etcd_member_kills.iter().enumerate() {
            let _ = writeln!(s, "  etcd member kill {}: {k}", i + 1);
        }
        let _ = writeln!(
            s,
            "  fencing: {} writes of instances that had lost their lease were fenced off",
            self.fenced_finishes
        );
        let _ = writeln!(s, "  postgres log: {}", self.postgres_log_line());
    }

    /// The latencies, the books and the histories, and how long it took.
    fn write_books(&self, s: &mut String) {
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
            "  books: payments {} succeeded, {} declined, {} canceled, {} pending; ledger {} charges ({} succeeded), {} refunds, {} minor units moved",
            b.payments_succeeded,
            b.payments_declined,
            b.payments_canceled,
            b.payments_pending,
            b.ledger_charges,
            b.ledger_succeeded,
            b.ledger_refunds,
            b.ledger_total_minor
        );
        let _ = writeln!(
            s,
            "  authorizations: {} authorized; captures {} succeeded, {} failed; released {} by void, {} by expiry",
            b.authorizations,
            b.captures_succeeded,
            b.captures_failed,
            b.released_by_void,
            b.released_by_expiry
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
    }

    /// Passed, or the violations (the first 20 with their evidence); the
    /// command that repeats the run.
    fn write_verdict(&self, s: &mut String) {
        if self.passed {
            let _ = writeln!(s, "PASSED: no violation of the money invariants");
        } else {
            let _ = writeln!(s, "FAILED: {} violation(s)", self.violation_count);
            for (invariant, count) in &self.violations_by_invariant {
                let _ = writeln!(s, "  {invariant}: {count}");
            }
            for v in self.violations.iter().take(20) {
                let _ = writeln!(s, "  - [{}] {}", v.invariant, v.detail);
                for line in &v.evidence {
                    let _ = writeln!(s, "      {line}");
                }
            }
        }
        let _ = writeln!(s, "repeat with: {}", self.repeat);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::history::CallResult;

    fn attempt(status: Option<u16>, sent_at: Instant, took_ms: u64) -> AttemptRecord {
        AttemptRecord {
            status,
            failure: status
                .is_none()
                .then_some(chargeonce_client::FailureKind::Lost),
            replayed: false,
            body_sha256: None,
            body: None,
            took: Duration::from_millis(took_ms),
            sent_at,
        }
    }

    #[test]
    fn a_failover_counts_the_failed_attempts_it_overlapped() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let call = CallRecord {
            intent: 0,
            kind: CallKind::Pay,
            instance: 0,
            attempts: vec![
                attempt(Some(503), at(0), 50),     // before the kill
                attempt(Some(503), at(900), 200),  // under way at the kill
                attempt(None, at(1_500), 3_000),   // lost, inside
                attempt(Some(201), at(2_000), 10), // succeeded, inside
                attempt(Some(503), at(5_000), 10), // after the first write
            ],
            result: CallResult::Uncertain,
            took: Duration::from_secs(6),
        };
        let log = NemesisLog {
            pg_failovers: 1,
            pg_failover_ms: vec![3_000],
            pg_failover_kills: vec![at(1_000)],
            ..NemesisLog::default()
        };
        let figures = FailoverFigures::of(&log, &[call]);
        assert_eq!(figures.len(), 1);
        let f = &figures[0];
        assert_eq!(f.kill_to_first_write_ms, 3_000);
        assert_eq!(f.requests, 3, "the three attempts under way in the window");
        assert_eq!(
            f.failed,
            BTreeMap::from([("503".to_owned(), 1), ("lost".to_owned(), 1)])
        );
        assert_eq!(f.failed_total(), 2);
    }
}
