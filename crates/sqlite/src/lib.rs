//! # chargeonce-sqlite
//!
//! An SQLite file for one process, durable and fast: every write is committed
//! with `synchronous=FULL` in WAL mode before it is answered, and writes that
//! arrive together share one transaction and one fsync (**group commit**).
//!
//! A [`Database`] owns one writer thread and a few reader threads, each with
//! its own [`rusqlite::Connection`]. Async code hands them closures:
//!
//! - [`Database::write`] queues a closure for the writer. The writer takes
//!   every closure waiting in its queue (up to [`Options::max_batch`]), opens
//!   one `BEGIN IMMEDIATE` transaction, runs each closure inside a savepoint of
//!   its own, and commits once. A closure decides whether its changes are kept
//!   ([`Write::Commit`]) or undone ([`Write::Rollback`]); an error undoes them
//!   too. Nobody is answered before the `COMMIT` returned: an answer may depend
//!   on what an earlier closure of the same batch wrote, so if the commit
//!   fails, every closure that asked to keep or undo its changes gets a
//!   [`Failure`], and nothing of the batch is in the file.
//! - [`Database::read`] runs a closure on a reader connection, which sees
//!   every committed write (and nothing uncommitted).
//! - [`Database::write_or_shed`] is [`Database::write`] for new work: when
//!   [`Options::queue`] writes are already waiting for the writer, it fails at
//!   once with [`Failure::Overloaded`] and its closure never runs. Writes
//!   that finish work already under way use [`Database::write`], which is
//!   never refused, so back-pressure only ever turns new work away.
//!
//! Closures run on plain threads with plain blocking calls: a statement costs
//! a microsecond or two, not a cross-thread round trip per statement as in an
//! async driver, and an fsync is paid once per batch instead of once per
//! write. Closures must be short and must not block on anything but SQLite;
//! the writer runs them one after the other.
//!
//! ```
//! use chargeonce_sqlite::{Database, Options, Write};
//!
//! // Any error type that a `Failure` converts into will do.
//! type Error = Box<dyn std::error::Error + Send + Sync>;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Error> {
//! let dir = tempfile::tempdir()?;
//! let db = Database::open(dir.path().join("example.db"), Options::default()).await?;
//! db.write(|conn| -> Result<_, Error> {
//!     conn.execute_batch("CREATE TABLE t (k TEXT PRIMARY KEY, n INTEGER NOT NULL)")?;
//!     Ok(Write::Commit(()))
//! })
//! .await?;
//!
//! // Concurrent writes: each answered once its shared transaction is durable.
//! let writes = (0..8).map(|n| {
//!     db.write(move |conn| -> Result<_, Error> {
//!         conn.execute("INSERT INTO t (k, n) VALUES (?1, ?2)", (format!("k{n}"), n))?;
//!         Ok(Write::Commit(n))
//!     })
//! });
//! let written = futures::future::try_join_all(writes).await?;
//! assert_eq!(written, (0..8).collect::<Vec<_>>());
//!
//! let count: i64 = db
//!     .read(|conn| -> Result<_, Error> {
//!         Ok(conn.query_row("SELECT count(*) FROM t", [], |row| row.get(0))?)
//!     })
//!     .await?;
//! assert_eq!(count, 8);
//! # Ok(()) }
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

pub use clock::{UNIX_MS_NOW, unix_ms_now};
pub use rusqlite;

mod clock;
mod readers;
mod writer;

use readers::ReadTask;
use writer::{Message, WriteTask};

/// How a write ends: its changes kept or undone. Either way the value is the
/// answer, sent once the batch's transaction committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write<T> {
    /// Keep this write's changes.
    Commit(T),
    /// Undo this write's changes (its savepoint is rolled back); the rest of
    /// the batch is not affected.
    Rollback(T),
}

/// Why a queued closure got no answer of its own. Every variant means that
/// nothing the closure wrote is in the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Failure {
    /// The database was closed (or its thread is gone); the closure never ran.
    #[error("the SQLite database is closed")]
    Closed,
    /// The closure never ran: its transaction could not begin (another
    /// process held the file's write lock past the busy timeout, say), or an
    /// earlier closure of its batch broke the transaction first.
    #[error("the write did not run: {0}")]
    NotRun(String),
    /// The closure ran, but its batch's transaction was rolled back (SQLite
    /// rolled it back after an I/O or disk-full error, or a savepoint
    /// statement failed): none of its changes were kept.
    #[error("the write's transaction was rolled back: {0}")]
    RolledBack(String),
    /// The closure ran, but `COMMIT` failed (a deferred constraint, a full
    /// disk, an fsync error): its batch was rolled back.
    #[error("the commit failed: {0}")]
    CommitFailed(String),
    /// The closure panicked; its changes were undone.
    #[error("the write panicked: {0}")]
    Panicked(String),
    /// The closure never ran: it was new work ([`Database::write_or_shed`])
    /// and the writer's queue already held [`Options::queue`] writes.
    #[error("the SQLite writer's queue is full ({0} writes waiting)")]
    Overloaded(usize),
}

impl Failure {
    /// Whether the closure's statements ran at all (they were undone in every
    /// case). `false` means they never reached SQLite.
    pub fn ran(&self) -> bool {
        !matches!(self, Self::Closed | Self::NotRun(_) | Self::Overloaded(_))
    }
}

/// Why a database could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// SQLite refused to open or set up the file.
    #[error("cannot open SQLite database {path}: {source}")]
    Sqlite {
        /// The file.
        path: PathBuf,
        /// What SQLite said.
        #[source]
        source: rusqlite::Error,
    },
    /// A thread could not be started.
    #[error("cannot start an SQLite thread: {0}")]
    Thread(#[from] std::io::Error),
}

/// The default of [`Options::queue`].
pub const DEFAULT_QUEUE: usize = 4096;

/// How a [`Database`] is opened.
#[derive(Debug, Clone)]
pub struct Options {
    /// How long a statement waits for another process to release the file's
    /// lock before failing with `SQLITE_BUSY`.
    pub busy_timeout: Duration,
    /// Enforce foreign keys (`PRAGMA foreign_keys = ON`).
    pub foreign_keys: bool,
    /// Reader threads (each with its own read-only connection). Zero sends
    /// reads through the writer, as an in-memory database must.
    pub readers: usize,
    /// The most writes one transaction carries.
    pub max_batch: usize,
    /// Prepared statements each connection keeps (`prepare_cached`).
    pub statement_cache: usize,
    /// The page cache of each reader connection, in KiB (`PRAGMA
    /// cache_size`). Readers mostly look up single rows; a scan (the
    /// reconciler's pages) would otherwise leave every reader holding
    /// SQLite's default 2 MiB. The writer keeps the default.
    pub reader_cache_kib: u32,
    /// The most writes waiting for the writer before
    /// [`Database::write_or_shed`] refuses new work with
    /// [`Failure::Overloaded`]. [`Database::write`] is never refused: it is
    /// for work already under way (a finish, a lease release), which was
    /// admitted when it started, so the queue stays bounded by this plus the
    /// operations in flight. Zero: never refuse.
    pub queue: usize,
    /// How many pages the WAL may hold before a commit copies them back into
    /// the database file (`PRAGMA wal_autocheckpoint`; zero: never, which
    /// leaves it to [`Database::close`]). SQLite's default is 1 000 pages
    /// (4 MiB); a checkpoint writes each page changed since the last one
    /// once, however often it changed, so checkpointing ten times less often
    /// writes the pages every payment touches (the tables' and sequential
    /// indexes' last pages) ten times less often: fresh payments on SQLite
    /// 1.05 to 1.09 times as fast in three alternated sets (docs/benchmarks.md).
    /// The WAL file is then about 40 MiB, and cut back to [`WAL_SIZE_LIMIT`]
    /// after a checkpoint that left it larger (a long reader can hold a
    /// checkpoint back).
    pub checkpoint_pages: u32,
}

/// The default of [`Options::checkpoint_pages`].
pub const DEFAULT_CHECKPOINT_PAGES: u32 = 10_000;

/// The size a WAL file is cut back to after a checkpoint (`PRAGMA
/// journal_size_limit`), in bytes: twice what [`DEFAULT_CHECKPOINT_PAGES`]
/// of 4 KiB fill.
pub const WAL_SIZE_LIMIT: i64 = 80 * 1024 * 1024;

impl Default for Options {
    fn default() -> Self {
        Self {
            busy_timeout: Duration::from_secs(5),
            foreign_keys: true,
            readers: 4,
            max_batch: 256,
            statement_cache: 128,
            reader_cache_kib: 512,
            queue: DEFAULT_QUEUE,
            checkpoint_pages: DEFAULT_CHECKPOINT_PAGES,
        }
    }
}

/// Counters of the writer, for tests and benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Transactions committed (or attempted).
    pub transactions: u64,
    /// Writes run inside them.
    pub writes: u64,
    /// The most writes one transaction carried.
    pub largest_batch: u64,
    /// Writes waiting in the writer's queue now.
    pub queued: usize,
    /// New writes refused because the queue was full
    /// ([`Failure::Overloaded`]).
    pub shed: u64,
}

/// Shared counters.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// Writes sent to the writer and not yet taken from its queue.
    pub(crate) queued: AtomicUsize,
    transactions: AtomicU64,
    writes: AtomicU64,
    largest_batch: AtomicU64,
    shed: AtomicU64,
}

impl Counters {
    fn batch(&self, writes: usize) {
        let writes = u64::try_from(writes).unwrap_or(u64::MAX);
        self.transactions.fetch_add(1, Ordering::Relaxed);
        self.writes.fetch_add(writes, Ordering::Relaxed);
        self.largest_batch.fetch_max(writes, Ordering::Relaxed);
    }
}

struct Shared {
    path: PathBuf,
    writer: flume::Sender<Message>,
    readers: Option<flume::Sender<readers::Message>>,
    reader_threads: usize,
    closed: AtomicBool,
    counters: Arc<Counters>,
    queue: usize,
}

/// An SQLite database: one writer thread with group commit, and reader threads.
/// Cheap to clone; the threads stop when the last clone is dropped or
/// [`Database::close`] is called.
#[derive(Clone)]
pub struct Database {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database")
            .field("path", &self.shared.path)
            .field("readers", &self.shared.reader_threads)
            .finish_non_exhaustive()
    }
}

/// Where the database lives.
#[derive(Debug, Clone)]
pub(crate) enum Location {
    File(PathBuf),
    Memory,
}

impl Location {
    /// The path to name in errors and to report: the file, or `:memory:`.
    pub(crate) fn path(&self) -> PathBuf {
        match self {
            Location::File(path) => path.clone(),
            Location::Memory => PathBuf::from(":memory:"),
        }
    }
}

impl Database {
    /// Opens (creating if missing) an SQLite file in WAL mode with
    /// `synchronous=FULL`, and starts its threads.
    pub fn open(
        path: impl AsRef<Path>,
        options: Options,
    ) -> impl Future<Output = Result<Self, OpenError>> + Send + 'static {
        Self::start(Location::File(path.as_ref().to_owned()), options)
    }

    /// A private in-memory database (for tests): one connection, so reads
    /// go through the writer. Gone when the database is dropped.
    pub async fn in_memory(options: Options) -> Result<Self, OpenError> {
        Self::start(
            Location::Memory,
            Options {
                readers: 0,
                ..options
            },
        )
        .await
    }

    async fn start(location: Location, options: Options) -> Result<Self, OpenError> {
        let counters = Arc::new(Counters::default());
        let writer = writer::spawn(&location, &options, Arc::clone(&counters)).await?;
        let readers = match &location {
            Location::File(path) if options.readers > 0 => {
                Some(readers::spawn(path, &options).await?)
            }
            _ => None,
        };
        let path = location.path();
        Ok(Self {
            shared: Arc::new(Shared {
                path,
                writer,
                reader_threads: if readers.is_some() {
                    options.readers
                } else {
                    0
                },
                readers,
                closed: AtomicBool::new(false),
                counters,
                queue: options.queue,
            }),
        })
    }

    /// The file (`:memory:` for an in-memory database).
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// Runs `work` on the writer, inside a savepoint of the batch's
    /// transaction, and answers once that transaction committed (see the
    /// crate docs). An `Err` from `work` undoes its changes and is returned as
    /// is; [`Failure`]s arrive through `E: From<Failure>`.
    ///
    /// Never refused for a full queue: use it for work already under way
    /// (finishing an operation that was admitted); new work goes through
    /// [`Database::write_or_shed`].
    pub async fn write<T, E, F>(&self, work: F) -> Result<T, E>
    where
        F: FnOnce(&rusqlite::Connection) -> Result<Write<T>, E> + Send + 'static,
        T: Send + 'static,
        E: From<Failure> + Send + 'static,
    {
        self.shared.counters.queued.fetch_add(1, Ordering::AcqRel);
        self.send_write(work).await
    }

    /// [`Database::write`] for new work: when the writer's queue already
    /// holds [`Options::queue`] writes, fails at once with
    /// [`Failure::Overloaded`] and `work` never runs (back-pressure: the
    /// caller answers "retry later" instead of queueing without bound).
    pub async fn write_or_shed<T, E, F>(&self, work: F) -> Result<T, E>
    where
        F: FnOnce(&rusqlite::Connection) -> Result<Write<T>, E> + Send + 'static,
        T: Send + 'static,
        E: From<Failure> + Send + 'static,
    {
        let queued = self.shared.counters.queued.fetch_add(1, Ordering::AcqRel);
        if self.shared.queue > 0 && queued >= self.shared.queue {
            self.shared.counters.queued.fetch_sub(1, Ordering::AcqRel);
            self.shared.counters.shed.fetch_add(1, Ordering::Relaxed);
            return Err(E::from(Failure::Overloaded(queued)));
        }
        self.send_write(work).await
    }

    /// Sends a write counted in `queued` (the writer uncounts it when it
    /// takes it from the queue) and waits for its answer.
    async fn send_write<T, E, F>(&self, work: F) -> Result<T, E>
    where
        F: FnOnce(&rusqlite::Connection) -> Result<Write<T>, E> + Send + 'static,
        T: Send + 'static,
        E: From<Failure> + Send + 'static,
    {
        if self.shared.closed.load(Ordering::Acquire) {
            self.shared.counters.queued.fetch_sub(1, Ordering::AcqRel);
            return Err(E::from(Failure::Closed));
        }
        let (task, answer) = WriteTask::new(work);
        if self
            .shared
            .writer
            .send_async(Message::Write(Box::new(task)))
            .await
            .is_err()
        {
            self.shared.counters.queued.fetch_sub(1, Ordering::AcqRel);
            return Err(E::from(Failure::Closed));
        }
        answer
            .await
            .unwrap_or_else(|_| Err(E::from(Failure::Closed)))
    }

    /// Runs `work` on a reader connection, which sees every committed write.
    /// Without readers (an in-memory database) it runs on the writer, inside
    /// the batch, and is undone like a [`Write::Rollback`].
    pub async fn read<T, E, F>(&self, work: F) -> Result<T, E>
    where
        F: FnOnce(&rusqlite::Connection) -> Result<T, E> + Send + 'static,
        T: Send + 'static,
        E: From<Failure> + Send + 'static,
    {
        if self.shared.closed.load(Ordering::Acquire) {
            return Err(E::from(Failure::Closed));
        }
        let Some(readers) = &self.shared.readers else {
            return self
                .write(move |conn| work(conn).map(Write::Rollback))
                .await;
        };
        let (task, answer) = ReadTask::new(work);
        readers
            .send_async(readers::Message::Read(Box::new(task)))
            .await
            .map_err(|_| E::from(Failure::Closed))?;
        answer
            .await
            .unwrap_or_else(|_| Err(E::from(Failure::Closed)))
    }

    /// The most writes that may wait for the writer before
    /// [`Database::write_or_shed`] refuses new work ([`Options::queue`];
    /// zero: no limit).
    pub fn queue_limit(&self) -> usize {
        self.shared.queue
    }

    /// The writer's counters so far.
    pub fn stats(&self) -> Stats {
        let c = &self.shared.counters;
        Stats {
            transactions: c.transactions.load(Ordering::Relaxed),
            writes: c.writes.load(Ordering::Relaxed),
            largest_batch: c.largest_batch.load(Ordering::Relaxed),
            queued: c.queued.load(Ordering::Relaxed),
            shed: c.shed.load(Ordering::Relaxed),
        }
    }

    /// Runs the writes already queued, then stops every thread and closes
    /// the connections (checkpointing the WAL). Later calls fail with
    /// [`Failure::Closed`]; the file stays.
    pub async fn close(&self) {
        if self.shared.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        if let Some(readers) = &self.shared.readers {
            for _ in 0..self.shared.reader_threads {
                let _ = readers.send_async(readers::Message::Stop).await;
            }
        }
        let (done, stopped) = tokio::sync::oneshot::channel();
        if self
            .shared
            .writer
            .send_async(Message::Stop(done))
            .await
            .is_ok()
        {
            let _ = stopped.await;
        }
    }
}

/// Opens a connection with the settings every thread shares, and the SQL
/// function `unix_ms_now()` (see [`unix_ms_now`]).
pub(crate) fn connect(
    location: &Location,
    flags: rusqlite::OpenFlags,
    options: &Options,
) -> Result<rusqlite::Connection, OpenError> {
    let conn = match location {
        Location::File(path) => rusqlite::Connection::open_with_flags(path, flags),
        Location::Memory => rusqlite::Connection::open_in_memory(),
    };
    let wrap = |source| OpenError::Sqlite {
        path: location.path(),
        source,
    };
    let conn = conn.map_err(wrap)?;
    conn.busy_timeout(options.busy_timeout).map_err(wrap)?;
    conn.set_prepared_statement_cache_capacity(options.statement_cache);
    conn.pragma_update(None, "foreign_keys", options.foreign_keys)
        .map_err(wrap)?;
    clock::register(&conn).map_err(wrap)?;
    Ok(conn)
}

/// The text of a panic's payload.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_owned()
    }
}
