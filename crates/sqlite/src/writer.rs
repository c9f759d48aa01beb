//! The writer thread: group commit.
//!
//! It waits for a write, takes every other write already queued (up to the
//! batch limit), and runs them in one `BEGIN IMMEDIATE` transaction, each in
//! a savepoint of its own, then commits once and answers them all. While it
//! commits, new writes queue up for the next batch: the busier the database,
//! the more writes share each fsync, with no timer and no added latency for a
//! lone write.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use rusqlite::{Connection, OpenFlags};
use tokio::sync::oneshot;

use crate::clock::at_one_instant;

use crate::{
    Counters, Failure, Location, OpenError, Options, WAL_SIZE_LIMIT, Write, connect, panic_message,
};

/// After a commit fails on a constraint (a deferred foreign key some write
/// left unresolved), this many batches run one write each, so that the write
/// at fault, when its caller retries it, fails alone.
const SOLO_BATCHES_AFTER_CONSTRAINT_FAILURE: u32 = 64;

/// What the writer's queue carries.
pub(crate) enum Message {
    /// A write to run.
    Write(Box<dyn Task>),
    /// Run what is queued before this, then stop.
    Stop(oneshot::Sender<()>),
}

/// A queued write, type-erased.
pub(crate) trait Task: Send {
    /// Runs the write inside its savepoint; `true` to keep its changes.
    fn run(&mut self, conn: &Connection) -> bool;
    /// Answers the caller once the transaction's fate is known: `Ok` when it
    /// committed. A write that never ran gets the failure in any case.
    fn answer(self: Box<Self>, fate: Result<(), Failure>);
}

/// What a write's closure returned.
enum Outcome<T, E> {
    Keep(T),
    Undo(T),
    Failed(E),
}

/// A write closure with its reply channel.
pub(crate) struct WriteTask<F, T, E> {
    work: Option<F>,
    outcome: Option<Outcome<T, E>>,
    reply: oneshot::Sender<Result<T, E>>,
}

impl<F, T, E> WriteTask<F, T, E>
where
    F: FnOnce(&Connection) -> Result<Write<T>, E> + Send + 'static,
    T: Send + 'static,
    E: From<Failure> + Send + 'static,
{
    /// A task and the receiver of its answer.
    pub(crate) fn new(work: F) -> (Self, oneshot::Receiver<Result<T, E>>) {
        let (reply, answer) = oneshot::channel();
        (
            Self {
                work: Some(work),
                outcome: None,
                reply,
            },
            answer,
        )
    }
}

impl<F, T, E> Task for WriteTask<F, T, E>
where
    F: FnOnce(&Connection) -> Result<Write<T>, E> + Send + 'static,
    T: Send + 'static,
    E: From<Failure> + Send + 'static,
{
    fn run(&mut self, conn: &Connection) -> bool {
        let Some(work) = self.work.take() else {
            return false;
        };
        let outcome = match catch_unwind(AssertUnwindSafe(|| at_one_instant(|| work(conn)))) {
            Ok(Ok(Write::Commit(value))) => Outcome::Keep(value),
            Ok(Ok(Write::Rollback(value))) => Outcome::Undo(value),
            Ok(Err(error)) => Outcome::Failed(error),
            Err(panic) => {
                let message = panic_message(panic.as_ref());
                tracing::error!(%message, "an SQLite write panicked; its changes are undone");
                Outcome::Failed(E::from(Failure::Panicked(message)))
            }
        };
        let keep = matches!(outcome, Outcome::Keep(_));
        self.outcome = Some(outcome);
        keep
    }

    fn answer(self: Box<Self>, fate: Result<(), Failure>) {
        let answer = match (self.outcome, fate) {
            (Some(Outcome::Failed(error)), _) => Err(error),
            (Some(Outcome::Keep(value) | Outcome::Undo(value)), Ok(())) => Ok(value),
            (_, Err(failure)) => Err(E::from(failure)),
            (None, Ok(())) => Err(E::from(Failure::NotRun("the write was not run".to_owned()))),
        };
        // The caller may have given up waiting; that changes nothing here.
        let _ = self.reply.send(answer);
    }
}

/// Opens the writer's connection and starts its thread.
pub(crate) async fn spawn(
    location: &Location,
    options: &Options,
    counters: Arc<Counters>,
) -> Result<flume::Sender<Message>, OpenError> {
    let (sender, queue) = flume::unbounded();
    let (ready, opened) = oneshot::channel();
    let location = location.clone();
    let options = options.clone();
    std::thread::Builder::new()
        .name("sqlite-writer".to_owned())
        .spawn(move || {
            let conn = match open(&location, &options) {
                Ok(conn) => conn,
                Err(error) => {
                    let _ = ready.send(Err(error));
                    return;
                }
            };
            let _ = ready.send(Ok(()));
            Writer {
                conn,
                queue,
                max_batch: options.max_batch.max(1),
                solo_batches: 0,
                counters,
            }
            .run();
        })?;
    match opened.await {
        Ok(result) => result.map(|()| sender),
        Err(_) => Err(OpenError::Thread(std::io::Error::other(
            "the SQLite writer thread ended while opening",
        ))),
    }
}

fn open(location: &Location, options: &Options) -> Result<Connection, OpenError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = connect(location, flags, options)?;
    let wrap = |source| OpenError::Sqlite {
        path: location.path(),
        source,
    };
    if matches!(location, Location::File(_)) {
        let mode: String = conn
            .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
            .map_err(wrap)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(wrap(rusqlite::Error::InvalidParameterName(format!(
                "journal_mode is {mode}, not wal"
            ))));
        }
        conn.pragma_update(None, "wal_autocheckpoint", options.checkpoint_pages)
            .map_err(wrap)?;
        conn.pragma_update(None, "journal_size_limit", WAL_SIZE_LIMIT)
            .map_err(wrap)?;
    }
    conn.pragma_update(None, "synchronous", "FULL")
        .map_err(wrap)?;
    // Each write of a batch runs in a savepoint, and every page of the file
    // a savepoint changes is first copied to the statement journal, to roll
    // back to. That journal is in memory, in one piece of up to 120 KiB (the
    // build's SQLITE_STMTJRNL_SPILL, set in .cargo/config.toml), allocated
    // once per write: a fresh payment's three writes (the claim, the finish,
    // the simulator's charge) copy about 35 pages together. It spills to a
    // temporary file only past that size (a sweep's large batch, say).
    // `temp_store = MEMORY` would keep it in memory too, but SQLite then
    // builds it from 1 KiB pieces, four allocations and four frees a page:
    // a sixth of a fresh payment's instructions (issue 38, part 11).
    Ok(conn)
}

struct Writer {
    conn: Connection,
    queue: flume::Receiver<Message>,
    max_batch: usize,
    solo_batches: u32,
    counters: Arc<Counters>,
}

impl Writer {
    fn run(mut self) {
        let mut stop = None;
        while stop.is_none() {
            // Every sender gone: nobody can ask anything any more.
            let Ok(first) = self.queue.recv() else { break };
            let mut batch = Vec::new();
            match first {
                Message::Write(task) => {
                    self.counters.queued.fetch_sub(1, Ordering::AcqRel);
                    batch.push(task);
                }
                Message::Stop(done) => stop = Some(done),
            }
            let limit = if self.solo_batches > 0 {
                self.solo_batches -= 1;
                1
            } else {
                self.max_batch
            };
            while stop.is_none() && batch.len() < limit {
                match self.queue.try_recv() {
                    Ok(Message::Write(task)) => {
                        self.counters.queued.fetch_sub(1, Ordering::AcqRel);
                        batch.push(task);
                    }
                    Ok(Message::Stop(done)) => stop = Some(done),
                    Err(_) => break,
                }
            }
            if !batch.is_empty() {
                self.run_batch(batch);
            }
        }
        // Writes queued behind the stop are dropped: their callers see `Closed`.
        drop(self.conn);
        let c = &self.counters;
        tracing::debug!(
            transactions = c.transactions.load(Ordering::Relaxed),
            writes = c.writes.load(Ordering::Relaxed),
            largest_batch = c.largest_batch.load(Ordering::Relaxed),
            "SQLite writer stopped"
        );
        if let Some(done) = stop {
            let _ = done.send(());
        }
    }

    fn exec(&self, sql: &str) -> Result<(), rusqlite::Error> {
        self.conn.prepare_cached(sql)?.execute([]).map(|_| ())
    }

    fn run_batch(&mut self, mut batch: Vec<Box<dyn Task>>) {
        self.counters.batch(batch.len());
        if let Err(error) = self.exec("BEGIN IMMEDIATE") {
            let failure = Failure::NotRun(format!("cannot begin a transaction: {error}"));
            for task in batch {
                task.answer(Err(failure.clone()));
            }
            return;
        }
        let mut ran = 0;
        let mut broken = None;
        for task in &mut batch {
            if let Err(error) = self.exec("SAVEPOINT write") {
                broken = Some(format!("savepoint: {error}"));
                break;
            }
            let keep = task.run(&self.conn);
            ran += 1;
            if self.conn.is_autocommit() {
                // SQLite rolled the whole transaction back after an error
                // (disk full, I/O): every write so far lost its changes.
                broken = Some("SQLite rolled the transaction back after an error".to_owned());
                break;
            }
            let ended = if keep {
                self.exec("RELEASE write")
            } else {
                self.exec("ROLLBACK TO write")
                    .and_then(|()| self.exec("RELEASE write"))
            };
            if let Err(error) = ended {
                broken = Some(format!("ending a savepoint: {error}"));
                break;
            }
        }
        let fate = match broken {
            Some(reason) => {
                self.roll_back();
                tracing::error!(%reason, "an SQLite batch was rolled back");
                Err(Failure::RolledBack(reason))
            }
            None => match self.exec("COMMIT") {
                Ok(()) => Ok(()),
                Err(error) => {
                    self.roll_back();
                    if is_constraint(&error) {
                        self.solo_batches = SOLO_BATCHES_AFTER_CONSTRAINT_FAILURE;
                    }
                    tracing::error!(%error, writes = ran, "an SQLite commit failed; its batch was rolled back");
                    Err(Failure::CommitFailed(error.to_string()))
                }
            },
        };
        for (i, task) in batch.into_iter().enumerate() {
            if i < ran {
                task.answer(fate.clone());
            } else {
                task.answer(Err(Failure::NotRun(
                    "an earlier write of its batch broke the transaction".to_owned(),
                )));
            }
        }
    }

    fn roll_back(&self) {
        if !self.conn.is_autocommit()
            && let Err(error) = self.exec("ROLLBACK")
        {
            tracing::error!(%error, "an SQLite rollback failed");
        }
    }
}

fn is_constraint(error: &rusqlite::Error) -> bool {
    matches!(
        error.sqlite_error_code(),
        Some(rusqlite::ErrorCode::ConstraintViolation)
    )
}
