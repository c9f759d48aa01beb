//! The writer's group commit and the readers, on real SQLite files.

#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::mpsc;
use std::time::Duration;

use chargeonce_sqlite::rusqlite::{self, Connection};
use chargeonce_sqlite::{Database, Failure, Options, Write};

#[derive(Debug)]
enum Error {
    Db(Failure),
    Sql(rusqlite::Error),
    Refused,
}

impl From<Failure> for Error {
    fn from(f: Failure) -> Self {
        Error::Db(f)
    }
}

impl From<rusqlite::Error> for Error {
    fn from(e: rusqlite::Error) -> Self {
        Error::Sql(e)
    }
}

const SCHEMA: &str = "CREATE TABLE parent (id TEXT PRIMARY KEY);
     CREATE TABLE t (k TEXT PRIMARY KEY, n INTEGER NOT NULL,
         parent TEXT REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED);";

async fn open(dir: &tempfile::TempDir) -> Database {
    let db = Database::open(dir.path().join("t.db"), Options::default())
        .await
        .unwrap();
    db.write(|conn| -> Result<_, Error> {
        conn.execute_batch(SCHEMA)?;
        Ok(Write::Commit(()))
    })
    .await
    .unwrap();
    db
}

fn insert(
    k: &str,
    n: i64,
) -> impl FnOnce(&Connection) -> Result<Write<i64>, Error> + Send + 'static {
    let k = k.to_owned();
    move |conn| {
        conn.execute("INSERT INTO t (k, n) VALUES (?1, ?2)", (&k, n))?;
        Ok(Write::Commit(n))
    }
}

async fn keys(db: &Database) -> Vec<String> {
    db.read(|conn| -> Result<_, Error> {
        let mut stmt = conn.prepare("SELECT k FROM t ORDER BY k")?;
        let rows = stmt.query_map([], |row| row.get(0))?;
        Ok(rows.collect::<Result<Vec<String>, _>>()?)
    })
    .await
    .unwrap()
}

/// A write that blocks the writer until `release` is sent, so that the
/// writes queued meanwhile form the next batch together.
fn gate(db: &Database) -> (mpsc::Sender<()>, tokio::task::JoinHandle<()>) {
    let (release, wait) = mpsc::channel::<()>();
    let db = db.clone();
    let handle = tokio::spawn(async move {
        db.write(move |_conn| -> Result<_, Error> {
            wait.recv_timeout(Duration::from_secs(10)).unwrap();
            Ok(Write::Commit(()))
        })
        .await
        .unwrap();
    });
    (release, handle)
}

/// Queues `work` on the writer from a task of its own.
fn spawn_write<T, F>(db: &Database, work: F) -> tokio::task::JoinHandle<Result<T, Error>>
where
    F: FnOnce(&Connection) -> Result<Write<T>, Error> + Send + 'static,
    T: Send + 'static,
{
    let db = db.clone();
    tokio::spawn(async move { db.write(work).await })
}

/// Waits until `writes` writes wait in the writer's queue (behind a gate).
async fn until_waiting(db: &Database, writes: usize) {
    while db.stats().queued < writes {
        tokio::task::yield_now().await;
    }
}

async fn until_queued(db: &Database, transactions: u64) {
    // The gate's batch has started once its transaction is counted.
    for _ in 0..500 {
        if db.stats().transactions >= transactions {
            return;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    panic!("the gate never ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writes_share_transactions_and_all_commit() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir).await;
    let before = db.stats();
    let writes = (0..400).map(|n| {
        let db = db.clone();
        tokio::spawn(async move { db.write(insert(&format!("k{n:03}"), n)).await.unwrap() })
    });
    let answers = futures::future::join_all(writes).await;
    assert_eq!(answers.len(), 400);
    let stats = db.stats();
    let writes = stats.writes - before.writes;
    let transactions = stats.transactions - before.transactions;
    assert_eq!(writes, 400);
    assert!(
        transactions < writes,
        "400 concurrent writes took {transactions} transactions: no group commit"
    );
    assert!(stats.largest_batch > 1);
    assert_eq!(keys(&db).await.len(), 400);
    // And the file holds them for any other connection.
    let other = Connection::open(dir.path().join("t.db")).unwrap();
    let count: i64 = other
        .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
        .unwrap();
    assert_eq!(count, 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_write_rolled_back_failed_or_panicking_leaves_no_trace_and_spares_its_batch() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir).await;
    let base = db.stats().transactions;
    let (release, gate) = gate(&db);
    until_queued(&db, base + 1).await;

    let kept = spawn_write(&db, insert("kept", 1));
    let undone = spawn_write(&db, |conn| {
        conn.execute("INSERT INTO t (k, n) VALUES ('undone', 2)", [])?;
        Ok(Write::Rollback("answered anyway"))
    });
    let failed = spawn_write(&db, |conn| -> Result<Write<()>, Error> {
        conn.execute("INSERT INTO t (k, n) VALUES ('failed', 3)", [])?;
        Err(Error::Refused)
    });
    let panicked = spawn_write(&db, |conn| -> Result<Write<()>, Error> {
        conn.execute("INSERT INTO t (k, n) VALUES ('panicked', 4)", [])?;
        panic!("a bug in a write");
    });
    let also_kept = spawn_write(&db, insert("also-kept", 5));
    // Let all five reach the queue, then open the gate.
    until_waiting(&db, 5).await;
    release.send(()).unwrap();
    gate.await.unwrap();

    assert_eq!(kept.await.unwrap().unwrap(), 1);
    assert_eq!(undone.await.unwrap().unwrap(), "answered anyway");
    assert!(matches!(failed.await.unwrap(), Err(Error::Refused)));
    assert!(matches!(
        panicked.await.unwrap(),
        Err(Error::Db(Failure::Panicked(_)))
    ));
    assert_eq!(also_kept.await.unwrap().unwrap(), 5);
    assert_eq!(keys(&db).await, vec!["also-kept", "kept"]);
    let stats = db.stats();
    assert_eq!(
        stats.transactions,
        base + 2,
        "the five writes shared one transaction"
    );
    assert!(stats.largest_batch >= 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failed_commit_answers_every_write_of_its_batch_with_a_failure_and_keeps_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir).await;
    let base = db.stats().transactions;
    let (release, gate) = gate(&db);
    until_queued(&db, base + 1).await;

    let innocent = tokio::spawn({
        let db = db.clone();
        async move { db.write(insert("innocent", 1)).await }
    });
    // A deferred foreign key left unresolved: only COMMIT notices.
    let culprit = tokio::spawn({
        let db = db.clone();
        async move {
            db.write(|conn| -> Result<_, Error> {
                conn.execute(
                    "INSERT INTO t (k, n, parent) VALUES ('culprit', 2, 'missing')",
                    [],
                )?;
                Ok(Write::Commit(()))
            })
            .await
        }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    release.send(()).unwrap();
    gate.await.unwrap();

    for answer in [innocent.await.unwrap().map(|_| ()), culprit.await.unwrap()] {
        match answer {
            Err(Error::Db(failure @ Failure::CommitFailed(_))) => assert!(failure.ran()),
            other => panic!("expected a failed commit, got {other:?}"),
        }
    }
    assert!(keys(&db).await.is_empty(), "nothing of the batch was kept");

    // The innocent write, retried, commits; the culprit, retried, fails alone.
    let (a, b) = tokio::join!(
        db.write(insert("innocent", 1)),
        db.write(|conn| -> Result<_, Error> {
            conn.execute(
                "INSERT INTO t (k, n, parent) VALUES ('culprit', 2, 'missing')",
                [],
            )?;
            Ok(Write::Commit(()))
        })
    );
    assert_eq!(a.unwrap(), 1);
    assert!(matches!(b, Err(Error::Db(Failure::CommitFailed(_)))));
    assert_eq!(keys(&db).await, vec!["innocent"]);
}

#[tokio::test]
async fn readers_see_only_committed_writes_and_cannot_write() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir).await;
    db.write(insert("a", 1)).await.unwrap();
    assert_eq!(keys(&db).await, vec!["a"]);
    let refused = db
        .read(|conn| -> Result<_, Error> {
            conn.execute("INSERT INTO t (k, n) VALUES ('b', 2)", [])?;
            Ok(())
        })
        .await;
    match refused {
        Err(Error::Sql(error)) => assert_eq!(
            error.sqlite_error_code(),
            Some(rusqlite::ErrorCode::ReadOnly)
        ),
        other => panic!("a reader wrote: {other:?}"),
    }
    assert_eq!(keys(&db).await, vec!["a"]);
}

#[tokio::test]
async fn writes_survive_closing_and_reopening_and_a_closed_database_runs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir).await;
    db.write(insert("durable", 7)).await.unwrap();
    db.close().await;
    let after = db.write(insert("late", 8)).await;
    assert!(matches!(after, Err(Error::Db(Failure::Closed))));
    assert!(!Failure::Closed.ran());
    let read = db.read(|_conn| -> Result<(), Error> { Ok(()) }).await;
    assert!(matches!(read, Err(Error::Db(Failure::Closed))));

    let reopened = Database::open(dir.path().join("t.db"), Options::default())
        .await
        .unwrap();
    assert_eq!(keys(&reopened).await, vec!["durable"]);
    let mode: String = reopened
        .read(|conn| -> Result<_, Error> {
            Ok(conn.query_row("PRAGMA journal_mode", [], |r| r.get(0))?)
        })
        .await
        .unwrap();
    assert_eq!(mode, "wal");
}

#[tokio::test]
async fn an_in_memory_database_reads_through_its_writer() {
    let db = Database::in_memory(Options::default()).await.unwrap();
    db.write(|conn| -> Result<_, Error> {
        conn.execute_batch(SCHEMA)?;
        Ok(Write::Commit(()))
    })
    .await
    .unwrap();
    db.write(insert("m", 1)).await.unwrap();
    assert_eq!(keys(&db).await, vec!["m"]);
}

#[tokio::test]
async fn opening_a_file_in_a_missing_folder_fails_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let error = Database::open(dir.path().join("no/such/folder/t.db"), Options::default())
        .await
        .unwrap_err();
    assert!(error.to_string().contains("no/such/folder"), "{error}");
}

/// A full queue refuses new work at once and runs none of it; work already
/// under way (`write`) is queued past the bound; both kinds run once the
/// writer is free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_sheds_new_work_only() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(
        dir.path().join("t.db"),
        Options {
            queue: 2,
            ..Options::default()
        },
    )
    .await
    .unwrap();
    db.write(|conn| -> Result<_, Error> {
        conn.execute_batch(SCHEMA)?;
        Ok(Write::Commit(()))
    })
    .await
    .unwrap();
    // Hold the writer inside a write until told to go on.
    let (entered_tx, entered) = mpsc::channel();
    let (go, go_rx) = mpsc::channel::<()>();
    let blocker = tokio::spawn({
        let db = db.clone();
        async move {
            db.write(move |_| -> Result<_, Error> {
                entered_tx.send(()).unwrap();
                go_rx.recv().unwrap();
                Ok(Write::Commit(()))
            })
            .await
        }
    });
    tokio::task::spawn_blocking(move || entered.recv().unwrap())
        .await
        .unwrap();
    let insert = |db: &Database, k: &'static str, shed: bool| {
        let db = db.clone();
        tokio::spawn(async move {
            let work = move |conn: &Connection| -> Result<_, Error> {
                conn.execute("INSERT INTO t (k, n) VALUES (?1, 1)", [k])?;
                Ok(Write::Commit(()))
            };
            if shed {
                db.write_or_shed(work).await
            } else {
                db.write(work).await
            }
        })
    };
    let queued = [insert(&db, "a", true), insert(&db, "b", true)];
    while db.stats().queued < 2 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    match db
        .write_or_shed(|conn| -> Result<_, Error> {
            conn.execute("INSERT INTO t (k, n) VALUES ('c', 1)", [])?;
            Ok(Write::Commit(()))
        })
        .await
    {
        Err(Error::Db(Failure::Overloaded(2))) => {}
        other => panic!("expected Overloaded(2), got {other:?}"),
    }
    let finishing = insert(&db, "d", false);
    while db.stats().queued < 3 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    go.send(()).unwrap();
    blocker.await.unwrap().unwrap();
    for write in queued {
        write.await.unwrap().unwrap();
    }
    finishing.await.unwrap().unwrap();
    let keys: Vec<String> = db
        .read(|conn| -> Result<_, Error> {
            let mut statement = conn.prepare("SELECT k FROM t ORDER BY k")?;
            let rows = statement.query_map([], |row| row.get(0))?;
            Ok(rows.collect::<Result<_, _>>()?)
        })
        .await
        .unwrap();
    assert_eq!(keys, ["a", "b", "d"], "the shed write never ran");
    let stats = db.stats();
    assert_eq!((stats.queued, stats.shed), (0, 1));
}

/// Writes `rows` rows of 4 KiB each, one commit each, to a new file opened
/// with `checkpoint_pages`; the sizes of the database file and of its WAL.
async fn file_sizes_after_writes(checkpoint_pages: u32, rows: i64) -> (u64, u64) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let options = Options {
        checkpoint_pages,
        ..Options::default()
    };
    let db = Database::open(&path, options).await.unwrap();
    db.write(|conn| -> Result<_, Error> {
        conn.execute_batch("CREATE TABLE blobs (n INTEGER PRIMARY KEY, b BLOB NOT NULL)")?;
        Ok(Write::Commit(()))
    })
    .await
    .unwrap();
    for n in 0..rows {
        db.write(move |conn| -> Result<_, Error> {
            conn.execute("INSERT INTO blobs (n, b) VALUES (?1, zeroblob(4096))", [n])?;
            Ok(Write::Commit(()))
        })
        .await
        .unwrap();
    }
    let size = |name: &str| std::fs::metadata(dir.path().join(name)).map_or(0, |m| m.len());
    (size("t.db"), size("t.db-wal"))
}

#[tokio::test]
async fn the_wal_is_copied_back_once_it_holds_checkpoint_pages() {
    // 200 rows of a page or more each: 400 or so pages of WAL in all.
    let (db_never, wal_never) = file_sizes_after_writes(0, 200).await;
    assert!(db_never < 200 * 4096, "nothing copied back: {db_never}");
    assert!(wal_never > 200 * 4096, "all in the WAL: {wal_never}");
    let (db_often, wal_often) = file_sizes_after_writes(20, 200).await;
    assert!(db_often > 200 * 4096, "copied back: {db_often}");
    assert!(
        wal_often < wal_never / 4,
        "the WAL reused from its start: {wal_often}"
    );
}

#[tokio::test]
async fn the_writer_is_set_to_checkpoint_pages_and_to_cut_the_wal_back() {
    let dir = tempfile::tempdir().unwrap();
    let settings = |db: Database| async move {
        db.write(|conn| -> Result<_, Error> {
            let pages: i64 = conn.pragma_query_value(None, "wal_autocheckpoint", |r| r.get(0))?;
            let limit: i64 = conn.pragma_query_value(None, "journal_size_limit", |r| r.get(0))?;
            Ok(Write::Rollback((pages, limit)))
        })
        .await
        .unwrap()
    };
    let default = Database::open(dir.path().join("a.db"), Options::default())
        .await
        .unwrap();
    assert_eq!(
        settings(default).await,
        (
            i64::from(chargeonce_sqlite::DEFAULT_CHECKPOINT_PAGES),
            chargeonce_sqlite::WAL_SIZE_LIMIT
        )
    );
    let chosen = Database::open(
        dir.path().join("b.db"),
        Options {
            checkpoint_pages: 500,
            ..Options::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(settings(chosen).await.0, 500);
}

/// The writer's statement journal (the pages a batch's savepoints can roll
/// back to) is one piece of memory of up to 120 KiB, from the build's
/// defines (.cargo/config.toml): with `temp_store = MEMORY` SQLite would
/// build it from 1 KiB pieces, and with SQLite's default spill it went to a
/// new temporary file past 64 KiB.
#[tokio::test]
async fn the_writer_journals_a_savepoint_in_one_piece_of_memory() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("a.db"), Options::default())
        .await
        .unwrap();
    let (temp_store, options) = db
        .write(|conn| -> Result<_, Error> {
            let store: i64 = conn.pragma_query_value(None, "temp_store", |r| r.get(0))?;
            let mut stmt = conn.prepare("PRAGMA compile_options")?;
            let options = stmt
                .query_map([], |row| row.get::<_, String>(0))?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Write::Rollback((store, options)))
        })
        .await
        .unwrap();
    // 0 is the default: the journal follows the spill threshold.
    assert_eq!(temp_store, 0);
    for wanted in ["STMTJRNL_SPILL=122880", "DEFAULT_MEMSTATUS=0"] {
        assert!(
            options.iter().any(|o| o == wanted),
            "SQLite was built without {wanted}: {options:?}"
        );
    }
}

/// A write whose journal outgrows its memory (it spills to a temporary
/// file) still rolls back alone, and the writes of its batch around it
/// are kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_write_whose_journal_spills_to_a_file_rolls_back_alone() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir).await;
    // 200 rows of 3 000 bytes, a page each: 800 KiB of pages, more than
    // the 120 KiB the journal keeps in memory.
    db.write(|conn| -> Result<_, Error> {
        conn.execute_batch(
            "CREATE TABLE big (id INTEGER PRIMARY KEY, body BLOB NOT NULL);
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200)
             INSERT INTO big (id, body) SELECT i, zeroblob(3000) FROM n;",
        )?;
        Ok(Write::Commit(()))
    })
    .await
    .unwrap();
    let base = db.stats().transactions;
    let (release, gate) = gate(&db);
    until_queued(&db, base + 1).await;
    let kept = spawn_write(&db, insert("kept", 1));
    let undone = spawn_write(&db, |conn| {
        let changed = conn.execute("UPDATE big SET body = randomblob(3000)", [])?;
        Ok(Write::Rollback(changed))
    });
    let also_kept = spawn_write(&db, insert("also-kept", 2));
    until_waiting(&db, 3).await;
    release.send(()).unwrap();
    gate.await.unwrap();

    assert_eq!(kept.await.unwrap().unwrap(), 1);
    assert_eq!(undone.await.unwrap().unwrap(), 200);
    assert_eq!(also_kept.await.unwrap().unwrap(), 2);
    assert_eq!(keys(&db).await, vec!["also-kept", "kept"]);
    let changed: i64 = db
        .read(|conn| -> Result<_, Error> {
            Ok(conn.query_row(
                "SELECT count(*) FROM big WHERE body <> zeroblob(3000)",
                [],
                |r| r.get(0),
            )?)
        })
        .await
        .unwrap();
    assert_eq!(changed, 0, "the undone write's changes are gone");
    assert_eq!(
        db.stats().transactions,
        base + 2,
        "the three writes shared one transaction"
    );
}
