//! PostgreSQL's own account of the run: every `WARNING` and `ERROR` that the
//! service's connections caused (application `chargeonce`) is a violation
//! (`database-quiet`), unless [`ALLOWED`] says why it is harmless.
//!
//! The store is written never to make PostgreSQL complain: a `COMMIT` or
//! `ROLLBACK` outside a transaction ("there is no transaction in
//! progress"), a deadlock or a serialization failure each point at a
//! transaction that did not do what its code says, the kind of bug that
//! lost claims with sqlx 0.9.0 (docs/chaos.md). The private cluster's log
//! names the SQLSTATE, the application and the statement of each message
//! (see `cluster::LOG_SETTINGS`).

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use crate::checker::Violation;

/// The service's connections, by their `application_name`.
const APPLICATION: &str = "chargeonce";

/// Messages the service causes on purpose or that a fault of the run
/// causes, by SQLSTATE, with why each is harmless. Empty: nothing the
/// service does today makes PostgreSQL warn or fail a statement, so any
/// message is a finding.
pub const ALLOWED: &[(&str, &str)] = &[];

/// At most this many messages are reported one by one.
const REPORTED: usize = 20;

/// One `WARNING` or `ERROR` of the server log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Message {
    /// When, as the log says it.
    pub at: String,
    /// `WARNING` or `ERROR`.
    pub level: String,
    /// The SQLSTATE.
    pub sqlstate: String,
    /// The connection's `application_name`.
    pub application: String,
    /// The message.
    pub text: String,
    /// The statement that caused it, when the log names it.
    pub statement: Option<String>,
}

/// What the log held.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LogFigures {
    /// Whether the run read a log (only a private cluster's is at hand).
    pub read: bool,
    /// Warnings and errors the service caused, allowed ones included, by
    /// `LEVEL SQLSTATE text`.
    pub by_message: BTreeMap<String, usize>,
    /// Of those, allowed by [`ALLOWED`].
    pub allowed: usize,
}

impl LogFigures {
    /// Warnings and errors the service caused (allowed ones included).
    pub fn total(&self) -> usize {
        self.by_message.values().sum()
    }
}

/// Reads the log at `path` (`None`: the run has none at hand) and judges it.
pub fn judge_file(path: Option<&Path>) -> (LogFigures, Vec<Violation>) {
    let Some(path) = path else {
        return (LogFigures::default(), Vec::new());
    };
    match std::fs::read(path) {
        Ok(bytes) => judge(&parse(&String::from_utf8_lossy(&bytes))),
        Err(error) => (
            LogFigures::default(),
            vec![Violation {
                invariant: "database-quiet",
                detail: format!("the server log {} was not read: {error}", path.display()),
                evidence: Vec::new(),
            }],
        ),
    }
}

/// The warnings and errors of a log written with the run's `log_line_prefix`
/// (`%m [%p] %e %a: `), each with the statement logged after it.
pub fn parse(log: &str) -> Vec<Message> {
    let mut out: Vec<Message> = Vec::new();
    let mut last_pid: Option<String> = None;
    for line in log.lines() {
        let Some(parsed) = Prefixed::of(line) else {
            continue;
        };
        match parsed.level {
            "WARNING" | "ERROR" => {
                last_pid = Some(parsed.pid.to_owned());
                out.push(Message {
                    at: parsed.at.to_owned(),
                    level: parsed.level.to_owned(),
                    sqlstate: parsed.sqlstate.to_owned(),
                    application: parsed.application.to_owned(),
                    text: parsed.text.to_owned(),
                    statement: None,
                });
            }
            "STATEMENT" if last_pid.as_deref() == Some(parsed.pid) => {
                if let Some(message) = out.last_mut().filter(|m| m.statement.is_none()) {
                    message.statement = Some(parsed.text.to_owned());
                }
                last_pid = None;
            }
            "DETAIL" | "HINT" | "CONTEXT" => {}
            _ => last_pid = None,
        }
    }
    out
}

/// A log line cut along `%m [%p] %e %a: LEVEL:  text`.
struct Prefixed<'a> {
    at: &'a str,
    pid: &'a str,
    sqlstate: &'a str,
    application: &'a str,
    level: &'a str,
    text: &'a str,
}

impl<'a> Prefixed<'a> {
    fn of(line: &'a str) -> Option<Self> {
        let open = line.find(" [")?;
        let at = &line[..open];
        let rest = &line[open + 2..];
        let (pid, rest) = rest.split_once("] ")?;
        let (sqlstate, rest) = rest.split_once(' ')?;
        // The application name may be empty or `[unknown]`; the level is
        // the first `WORD:  ` after it.
        let (application, rest) = rest.split_once(": ")?;
        let (level, text) = rest.split_once(":  ")?;
        if !level.chars().all(|c| c.is_ascii_uppercase()) {
            return None;
        }
        Some(Self {
            at,
            pid,
            sqlstate,
            application,
            level,
            text,
        })
    }
}

/// The service's messages as figures, and a violation for each not allowed.
pub fn judge(messages: &[Message]) -> (LogFigures, Vec<Violation>) {
    let mut figures = LogFigures {
        read: true,
        ..LogFigures::default()
    };
    let mut violations = Vec::new();
    for message in messages.iter().filter(|m| m.application == APPLICATION) {
        let name = format!("{} {} {}", message.level, message.sqlstate, message.text);
        *figures.by_message.entry(name).or_default() += 1;
        if ALLOWED.iter().any(|(state, _)| *state == message.sqlstate) {
            figures.allowed += 1;
            continue;
        }
        if violations.len() < REPORTED {
            violations.push(Violation {
                invariant: "database-quiet",
                detail: format!(
                    "PostgreSQL {} {} at {}: {}{}",
                    message.level,
                    message.sqlstate,
                    message.at,
                    message.text,
                    message
                        .statement
                        .as_deref()
                        .map(|s| format!(" (statement: {s})"))
                        .unwrap_or_default()
                ),
                evidence: Vec::new(),
            });
        }
    }
    let unallowed = figures.total() - figures.allowed;
    if unallowed > violations.len() {
        violations.push(Violation {
            invariant: "database-quiet",
            detail: format!(
                "{} more PostgreSQL warnings or errors",
                unallowed - violations.len()
            ),
            evidence: Vec::new(),
        });
    }
    (figures, violations)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "\
2026-12-04 22:52:36.341 UTC [9134] 57P03 [unknown]: FATAL:  the database system is starting up
2026-12-04 22:52:37.000 UTC [9150] 00000 : LOG:  checkpoint starting: time
2026-12-04 22:52:44.040 UTC [9154] 25P01 chargeonce: WARNING:  there is no transaction in progress
2026-12-04 22:52:44.040 UTC [9154] 25P01 chargeonce: STATEMENT:  ROLLBACK
2026-12-04 22:52:45.100 UTC [9160] 40P01 chargeonce: ERROR:  deadlock detected
2026-12-04 22:52:45.100 UTC [9160] 40P01 chargeonce: DETAIL:  Process 9160 waits for ShareLock on transaction 1; blocked by process 9161.
\tProcess 9161 waits for ShareLock on transaction 2; blocked by process 9160.
2026-12-04 22:52:45.100 UTC [9160] 40P01 chargeonce: STATEMENT:  UPDATE payments SET status = 'succeeded'
2026-12-04 22:52:46.000 UTC [9170] 42P01 psql: ERROR:  relation \"x\" does not exist
";

    #[test]
    fn warnings_and_errors_are_read_with_their_statements() {
        let messages = parse(LOG);
        assert_eq!(messages.len(), 3, "{messages:#?}");
        assert_eq!(messages[0].level, "WARNING");
        assert_eq!(messages[0].sqlstate, "25P01");
        assert_eq!(messages[0].application, "chargeonce");
        assert_eq!(messages[0].text, "there is no transaction in progress");
        assert_eq!(messages[0].statement.as_deref(), Some("ROLLBACK"));
        assert_eq!(messages[1].sqlstate, "40P01");
        assert_eq!(
            messages[1].statement.as_deref(),
            Some("UPDATE payments SET status = 'succeeded'")
        );
        assert_eq!(messages[2].application, "psql");
    }

    #[test]
    fn what_the_service_caused_is_a_violation_and_others_are_not() {
        let (figures, violations) = judge(&parse(LOG));
        assert!(figures.read);
        assert_eq!(figures.total(), 2, "psql's error is not the service's");
        assert_eq!(violations.len(), 2);
        assert!(violations.iter().all(|v| v.invariant == "database-quiet"));
        assert!(
            violations[0]
                .detail
                .contains("WARNING 25P01 at 2026-12-04 22:52:44.040 UTC: there is no transaction in progress (statement: ROLLBACK)"),
            "{}",
            violations[0].detail
        );
    }

    #[test]
    fn a_quiet_log_passes_and_no_log_is_not_read() {
        let (figures, violations) = judge(&parse(
            "2026-12-04 22:52:37.000 UTC [9150] 00000 : LOG:  checkpoint starting: time\n",
        ));
        assert_eq!((figures.read, figures.total()), (true, 0));
        assert!(violations.is_empty());
        let (figures, violations) = judge_file(None);
        assert!(!figures.read);
        assert!(violations.is_empty());
    }
}
