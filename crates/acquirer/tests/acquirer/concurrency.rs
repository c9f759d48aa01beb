//! Races on one acquirer key: exactly one row, one first execution, whatever
//! the number of callers, connections and processes.

use std::collections::HashSet;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use chargeonce_acquirer::{Simulator, tokens};
use chargeonce_core::{Acquirer, AcquirerError, ChargeRequest, ChargeResult, PaymentId};

use crate::common::{TempDir, file_sim, request, request_for};

/// What a crowd of callers saw.
#[derive(Debug, Default)]
struct Tally {
    lost: usize,
    /// The distinct answers (`ChargeResult` is not `Hash`).
    answers: Vec<ChargeResult>,
}

impl Tally {
    fn answered(&mut self, result: ChargeResult) {
        if !self.answers.contains(&result) {
            self.answers.push(result);
        }
    }
}

/// `tasks` concurrent charges of one request, alternating between simulators.
async fn crowd(sims: &[Arc<Simulator>], req: &ChargeRequest, tasks: usize) -> Tally {
    let mut handles = Vec::new();
    for i in 0..tasks {
        let sim = Arc::clone(&sims[i % sims.len()]);
        let req = req.clone();
        handles.push(tokio::spawn(async move { sim.charge(&req).await }));
    }
    let mut tally = Tally::default();
    for handle in handles {
        match handle.await.unwrap() {
            Ok(result) => tally.answered(result),
            Err(AcquirerError::Unknown(message)) => {
                assert_eq!(message, chargeonce_acquirer::LOST_ANSWER);
                tally.lost += 1;
            }
            Err(other) => panic!("unexpected {other:?}"),
        }
    }
    tally
}

async fn two_sims_on_one_file(path: &Path) -> Vec<Arc<Simulator>> {
    let (a, b) = tokio::join!(file_sim(path), file_sim(path));
    vec![Arc::new(a), Arc::new(b)]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_callers_two_instances_one_file_one_row() {
    let dir = TempDir::new();
    let sims = two_sims_on_one_file(&dir.ledger()).await;
    let req = request(tokens::OK);

    let tally = crowd(&sims, &req, 50).await;
    assert_eq!(tally.lost, 0);
    assert_eq!(tally.answers.len(), 1, "every caller got the same answer");

    for sim in &sims {
        let ledger = sim.ledger().await.unwrap();
        assert_eq!(ledger.len(), 1, "exactly one row");
        assert_eq!(tally.answers.first(), Some(&ledger[0].result()));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_timeouts_lose_exactly_one_answer() {
    let dir = TempDir::new();
    let sims = two_sims_on_one_file(&dir.ledger()).await;
    let req = request(tokens::TIMEOUT);

    let tally = crowd(&sims, &req, 50).await;
    assert_eq!(
        tally.lost, 1,
        "only the execution that wrote the row loses its answer"
    );
    let ledger = sims[0].ledger().await.unwrap();
    assert_eq!(ledger.len(), 1);
    assert_eq!(tally.answers, [ledger[0].result()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_slow_charges_wait_exactly_once() {
    let dir = TempDir::new();
    let sims = two_sims_on_one_file(&dir.ledger()).await;
    let req = request(tokens::SLOW);
    let slow = sims[0].config().slow;

    let mut handles = Vec::new();
    for i in 0..20 {
        let sim = Arc::clone(&sims[i % 2]);
        let req = req.clone();
        handles.push(tokio::spawn(async move {
            let started = std::time::Instant::now();
            let result = sim.charge(&req).await.unwrap();
            (result, started.elapsed())
        }));
    }
    let mut slow_ones = 0;
    let mut answers = Tally::default();
    for handle in handles {
        let (result, elapsed) = handle.await.unwrap();
        answers.answered(result);
        if elapsed >= slow {
            slow_ones += 1;
        }
    }
    assert_eq!(slow_ones, 1, "only the first execution is slow");
    assert_eq!(answers.answers.len(), 1);
    assert_eq!(sims[0].ledger().await.unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_keys_from_two_instances_are_all_recorded() {
    let dir = TempDir::new();
    let sims = two_sims_on_one_file(&dir.ledger()).await;
    let mut handles = Vec::new();
    for i in 0..40 {
        let sim = Arc::clone(&sims[i % 2]);
        handles.push(tokio::spawn(async move {
            let req = request(tokens::OK);
            sim.charge(&req).await.unwrap()
        }));
    }
    for handle in handles {
        handle.await.unwrap();
    }
    assert_eq!(sims[1].ledger().await.unwrap().len(), 40);
}

// ---------------------------------------------------------------------------
// Several OS processes on one ledger file: this test binary runs itself as
// children (the ignored test below), and every process opens the new file at
// the same instant, then charges one key at the same instant.

const CHILD_LEDGER: &str = "CHARGEONCE_SIM_TEST_LEDGER";
const CHILD_PAYMENT: &str = "CHARGEONCE_SIM_TEST_PAYMENT";
const CHILD_OPEN_AT: &str = "CHARGEONCE_SIM_TEST_OPEN_AT_MS";
const CHILD_CHARGE_AT: &str = "CHARGEONCE_SIM_TEST_CHARGE_AT_MS";
const CHILD_TASKS: usize = 25;
const CHILD_PROCESSES: usize = 2;

fn unix_ms() -> u64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    u64::try_from(since.as_millis()).unwrap()
}

async fn sleep_until_ms(at: u64) {
    let now = unix_ms();
    if at > now {
        tokio::time::sleep(Duration::from_millis(at - now)).await;
    }
}

/// One process's share of the race: open at `open_at`, charge at `charge_at`.
async fn race_in_this_process(
    path: &Path,
    payment_id: PaymentId,
    open_at: u64,
    charge_at: u64,
) -> Tally {
    sleep_until_ms(open_at).await;
    let sim = Arc::new(file_sim(path).await);
    sleep_until_ms(charge_at).await;
    crowd(
        &[sim],
        &request_for(payment_id, tokens::TIMEOUT),
        CHILD_TASKS,
    )
    .await
}

/// Runs only as a child of `processes_sharing_one_file_charge_once`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "a child process of processes_sharing_one_file_charge_once"]
async fn child_process_charges() {
    let Ok(path) = std::env::var(CHILD_LEDGER) else {
        return;
    };
    let env = |name: &str| std::env::var(name).unwrap();
    let payment_id = PaymentId::parse(&env(CHILD_PAYMENT)).unwrap();
    let tally = race_in_this_process(
        Path::new(&path),
        payment_id,
        env(CHILD_OPEN_AT).parse().unwrap(),
        env(CHILD_CHARGE_AT).parse().unwrap(),
    )
    .await;
    let ids: Vec<String> = tally
        .answers
        .iter()
        .map(|a| match a {
            ChargeResult::Succeeded {
                provider_payment_id,
            } => provider_payment_id.clone(),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    println!("CHILD_TALLY lost={} ids={}", tally.lost, ids.join(","));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn processes_sharing_one_file_charge_once() {
    let dir = TempDir::new();
    let path = dir.ledger();
    let payment_id = PaymentId::generate();
    let open_at = unix_ms() + 1_500;
    let charge_at = open_at + 1_000;

    let exe = std::env::current_exe().unwrap();
    let mut children = Vec::new();
    for _ in 0..CHILD_PROCESSES {
        let child = tokio::process::Command::new(&exe)
            .args([
                "concurrency::child_process_charges",
                "--exact",
                "--ignored",
                "--nocapture",
            ])
            .env(CHILD_LEDGER, &path)
            .env(CHILD_PAYMENT, payment_id.as_str())
            .env(CHILD_OPEN_AT, open_at.to_string())
            .env(CHILD_CHARGE_AT, charge_at.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        children.push(child);
    }
    // The children run from here on; their outputs are collected in turn.
    let children = async {
        let mut outputs = Vec::new();
        for child in children {
            outputs.push(child.wait_with_output().await);
        }
        outputs
    };
    let mine = race_in_this_process(&path, payment_id.clone(), open_at, charge_at);
    let (outputs, mine) = tokio::join!(children, mine);

    let mut lost = mine.lost;
    let mut ids: HashSet<String> = mine
        .answers
        .iter()
        .map(|a| match a {
            ChargeResult::Succeeded {
                provider_payment_id,
            } => provider_payment_id.clone(),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    for output in outputs {
        let output = output.unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "child failed: {stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let line = stdout
            .lines()
            .find_map(|l| l.strip_prefix("CHILD_TALLY "))
            .unwrap_or_else(|| panic!("child printed no tally: {stdout}"));
        let (lost_part, ids_part) = line.split_once(' ').unwrap();
        lost += lost_part
            .strip_prefix("lost=")
            .unwrap()
            .parse::<usize>()
            .unwrap();
        ids.extend(
            ids_part
                .strip_prefix("ids=")
                .unwrap()
                .split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_owned),
        );
    }

    let sim = file_sim(&path).await;
    let ledger = sim.ledger().await.unwrap();
    assert_eq!(ledger.len(), 1, "one row for one key across processes");
    assert_eq!(
        lost, 1,
        "exactly one execution in all processes lost its answer"
    );
    assert_eq!(ids, HashSet::from([ledger[0].id.clone()]));
}
