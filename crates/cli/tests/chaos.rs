//! `chargeonce chaos` end to end: a small clean run passes with every kind of
//! fault injected, and a run with a deliberately broken acquirer (it skips its
//! key check) is caught by the checker: a green run means something.
#![allow(clippy::unwrap_used, missing_docs)]

use std::process::Stdio;

use serde_json::Value;

async fn chaos(extra: &[&str]) -> (i32, Value, String) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("report.json");
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_chargeonce"))
        .args([
            "chaos",
            "--intents",
            "200",
            "--clients",
            "12",
            "--kills",
            "1",
            "--freezes",
            "1",
            "--commit-window-kills",
            "1",
            "--pg-restarts",
            "1",
            "--no-progress",
            "--json",
        ])
        .arg(&json)
        .args(extra)
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    eprintln!("{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    (out.status.code().unwrap_or(-1), report, stdout)
}

#[tokio::test]
async fn a_small_run_under_every_fault_passes() {
    let (code, report, stdout) = chaos(&["--seed", "11"]).await;
    assert_eq!(code, 0, "{stdout}");
    assert_eq!(report["passed"], true);
    assert_eq!(report["violation_count"], 0);
    assert_eq!(report["seed"], 11);
    assert!(
        stdout.contains("repeat with: chargeonce chaos --seed 11"),
        "{stdout}"
    );
    let nemesis = &report["nemesis"];
    assert!(nemesis["kills"].as_u64().unwrap() >= 2, "{nemesis}");
    assert_eq!(nemesis["freezes"], 1, "{nemesis}");
    assert_eq!(nemesis["commit_window_kills"], 1, "{nemesis}");
    assert_eq!(nemesis["pg_restarts"], 1, "{nemesis}");
    assert!(report["proxy"]["answers_dropped"].as_u64().unwrap() > 0);
    assert!(report["outcomes"]["paid"].as_u64().unwrap() > 100);
    assert_eq!(report["books"]["payments_pending"], 0);
    // PostgreSQL's own log was read, and the service made it say nothing.
    assert_eq!(
        report["postgres_log"]["read"], true,
        "{}",
        report["postgres_log"]
    );
    assert!(
        stdout.contains("postgres log: 0 warnings or errors"),
        "{stdout}"
    );
}

/// An acquirer that ignores keys, and a service told so: lost answers,
/// kills and take-overs are resolved by the settle window and a look-up by
/// reference, never by sending again on a guess. One charge per payment.
///
/// The settle window is the longest a process may stall between extending
/// its lease and its request reaching the acquirer: nothing can fence a
/// request that is already out of the process's hands. So it must outlast
/// the freeze (three leases, 6 s here); with 3 s, a charge sent by an
/// instance frozen just before its send landed after another instance's
/// look-up had found nothing and charged (seed 13, once in a few runs).
#[tokio::test]
async fn an_acquirer_without_keys_that_the_service_knows_of_charges_once() {
    let (code, report, stdout) = chaos(&[
        "--seed",
        "13",
        "--acquirer-without-keys",
        "--settle-window",
        "8s",
        "--acquirer-lost-rate",
        "0.1",
    ])
    .await;
    assert_eq!(code, 0, "{stdout}");
    assert_eq!(report["passed"], true);
    assert!(
        stdout.contains("--acquirer-without-keys --settle-window 8s"),
        "{stdout}"
    );
    let books = &report["books"];
    assert_eq!(books["payments_pending"], 0, "{books}");
    assert_eq!(
        books["ledger_charges"].as_u64().unwrap(),
        books["payments_succeeded"].as_u64().unwrap()
            + books["payments_declined"].as_u64().unwrap(),
        "one attempt per payment: {books}"
    );
}

#[tokio::test]
async fn an_acquirer_that_skips_its_key_check_is_caught() {
    let (code, report, stdout) = chaos(&[
        "--seed",
        "12",
        "--sabotage",
        "acquirer-skips-key-check",
        "--acquirer-lost-rate",
        "0.1",
    ])
    .await;
    assert_eq!(code, 1, "{stdout}");
    assert_eq!(report["passed"], false);
    let by = &report["violations_by_invariant"];
    assert!(
        by["one-charge-per-succeeded-payment"].as_u64().unwrap_or(0) > 0,
        "{by}"
    );
    assert!(stdout.contains("FAILED"), "{stdout}");
}

/// The same faults on the SQLite store (`--store sqlite`): one process by
/// design, so one instance, whose kills are crashes of the only process
/// (what it acknowledged must be in the file; what it left running, the
/// restarted process resumes), including the kill between the acquirer's
/// commit and the store's; no database restart. The lifecycle
/// (authorizations, captures, voids, expiries) runs as on PostgreSQL.
#[tokio::test]
async fn a_small_run_on_sqlite_passes() {
    let (code, report, stdout) =
        chaos(&["--seed", "14", "--store", "sqlite", "--instances", "1"]).await;
    assert_eq!(code, 0, "{stdout}");
    assert_eq!(report["passed"], true);
    assert_eq!(report["store"], "sqlite");
    assert!(
        stdout.contains("--instances 1 ") && stdout.contains(" --store sqlite"),
        "the repeat command names the store: {stdout}"
    );
    let nemesis = &report["nemesis"];
    assert!(nemesis["kills"].as_u64().unwrap() >= 2, "{nemesis}");
    assert_eq!(nemesis["commit_window_kills"], 1, "{nemesis}");
    assert_eq!(nemesis["pg_restarts"], 0, "{nemesis}");
    assert!(report["outcomes"]["paid"].as_u64().unwrap() > 100);
    assert!(report["books"]["authorizations"].as_u64().unwrap() > 0);
    assert_eq!(report["books"]["payments_pending"], 0);
    assert!(stdout.contains("store SQLite"), "{stdout}");
}
