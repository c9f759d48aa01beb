//! The store's connections: sqlx's pool, and the connections a statement
//! hands back without the pool's round trip.
//!
//! sqlx's pool tests every connection given back to it: dropping a
//! `PoolConnection` spawns a task that sends `Sync` and waits for
//! PostgreSQL's `ReadyForQuery` before the connection is idle again. That is
//! one more round trip per statement, a wake-up of the server's backend
//! and of ours, and the connection held meanwhile: on a fresh payment, two
//! of the four messages the service sent PostgreSQL per fresh payment
//! (`perf stat` of its `sendto` calls). Without them the server spent 0.76
//! to 0.83 of its CPU per fresh payment and served 1.12 to 1.19 times the
//! payments/s (`STORE=postgres bench/ab fresh`, docs/benchmarks.md).
//!
//! A statement that ran to its end left its connection clean (sqlx drains
//! any `ReadyForQuery` still due before the next statement), so the
//! connection is parked here instead and the next statement takes it
//! first. Anything else goes back through the pool and its test: a
//! statement cut off (its future dropped by a timeout), an I/O or protocol
//! error, a server that refused it as a whole (a read-only node, a
//! shutdown), a transaction. Every statement takes its connection here,
//! never from the pool directly, so a parked connection is never idle
//! while a caller waits on the pool: the wait ends on whichever comes
//! first, a parked connection or one from the pool.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sqlx::pool::PoolConnection;
use sqlx::{PgConnection, PgPool, Postgres, Transaction};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// How long a connection may stay parked; past it, it goes back through the
/// pool, which tests it (and closes it once past its idle or lifetime
/// limits): an idle connection may have been cut by a proxy meanwhile.
const PARKED_AT_MOST: Duration = Duration::from_secs(30);

/// sqlx's pool with the parked connections in front of it.
#[derive(Debug)]
pub(super) struct Connections {
    pool: PgPool,
    /// Newest last: the next statement takes the connection used last.
    parked: Mutex<Vec<Parked>>,
    /// Woken when a connection is parked.
    parked_one: Notify,
    acquire_timeout: Duration,
}

#[derive(Debug)]
struct Parked {
    conn: PoolConnection<Postgres>,
    since: Instant,
}

impl Connections {
    /// The pool's connections; a caller waits at most `acquire_timeout` for one.
    pub(super) fn new(pool: PgPool, acquire_timeout: Duration) -> Self {
        Self {
            pool,
            parked: Mutex::new(Vec::new()),
            parked_one: Notify::new(),
            acquire_timeout,
        }
    }

    /// sqlx's pool itself (migrations, tests and tools).
    pub(super) fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Runs one statement on a connection of its own; parks the connection
    /// after it when the statement ran to its end.
    pub(super) async fn run<T>(
        self: &Arc<Self>,
        statement: impl AsyncFnOnce(&mut PgConnection) -> Result<T, sqlx::Error>,
    ) -> Result<T, sqlx::Error> {
        let mut conn = self.take().await?;
        let result = statement(&mut conn).await;
        if ran_to_its_end(&result) {
            self.park(conn);
        }
        result
    }

    /// Begins a transaction on a connection of its own. Its connection goes
    /// back through the pool when it ends.
    pub(super) async fn begin(
        self: &Arc<Self>,
    ) -> Result<Transaction<'static, Postgres>, sqlx::Error> {
        let conn = self.take().await?;
        // What `Pool::begin` does with the connection it acquires.
        Transaction::begin(conn, None).await
    }

    /// A connection: the one parked last, else one from the pool, whichever
    /// comes first; `PoolTimedOut` past the acquire timeout.
    pub(super) async fn take(self: &Arc<Self>) -> Result<PoolConnection<Postgres>, sqlx::Error> {
        // The common case under load, with no timer and no wait registered.
        if let Some(conn) = self.unpark() {
            return Ok(conn);
        }
        tokio::time::timeout(self.acquire_timeout, self.wait_for_one())
            .await
            .unwrap_or(Err(sqlx::Error::PoolTimedOut))
    }

    async fn wait_for_one(self: &Arc<Self>) -> Result<PoolConnection<Postgres>, sqlx::Error> {
        let mut acquiring: Option<JoinHandle<Result<PoolConnection<Postgres>, sqlx::Error>>> = None;
        let taken = loop {
            // Registered before the list is read: a connection parked in
            // between still wakes this wait.
            let parked_one = self.parked_one.notified();
            tokio::pin!(parked_one);
            parked_one.as_mut().enable();
            if let Some(conn) = self.unpark() {
                break Ok(conn);
            }
            // The pool's own wait runs in a task of its own: an acquire
            // cancelled while it opens a connection throws the connection
            // away (and PostgreSQL its backend), which under load cost a
            // connection per statement.
            let acquire = acquiring.get_or_insert_with(|| {
                let pool = self.pool.clone();
                tokio::spawn(async move { pool.acquire().await })
            });
            tokio::select! {
                joined = acquire => {
                    acquiring = None;
                    break joined.unwrap_or(Err(sqlx::Error::WorkerCrashed));
                }
                () = &mut parked_one => {}
            }
        };
        // A parked connection came first: the pool's, when it comes, is
        // parked for the next caller.
        if let Some(acquire) = acquiring {
            let conns = Arc::clone(self);
            tokio::spawn(async move {
                if let Ok(Ok(conn)) = acquire.await {
                    conns.park(conn);
                }
            });
        }
        taken
    }

    fn unpark(&self) -> Option<PoolConnection<Postgres>> {
        let mut parked = self.parked.lock().ok()?;
        // Stale ones are dropped: back to the pool, which tests them.
        while let Some(Parked { conn, since }) = parked.pop() {
            if since.elapsed() <= PARKED_AT_MOST {
                return Some(conn);
            }
        }
        None
    }

    fn park(&self, conn: PoolConnection<Postgres>) {
        if self.pool.is_closed() {
            return;
        }
        let Ok(mut parked) = self.parked.lock() else {
            return;
        };
        // The oldest is at the bottom, where a quiet spell leaves it.
        if parked
            .first()
            .is_some_and(|oldest| oldest.since.elapsed() > PARKED_AT_MOST)
        {
            parked.remove(0);
        }
        parked.push(Parked {
            conn,
            since: Instant::now(),
        });
        drop(parked);
        self.parked_one.notify_one();
    }

    /// Gives every parked connection back to the pool, then closes it.
    pub(super) async fn close(&self) {
        if let Ok(mut parked) = self.parked.lock() {
            parked.clear();
        }
        self.pool.close().await;
    }
}

/// Whether a statement's connection is known clean after it: it answered,
/// or PostgreSQL refused the statement on its data (class 22, data
/// exception: the finish's all-or-nothing check) or a constraint (class 23:
/// a key or order already taken). Any other error sends the connection back
/// through the pool's test.
fn ran_to_its_end<T>(result: &Result<T, sqlx::Error>) -> bool {
    match result {
        Ok(_) => true,
        Err(sqlx::Error::Database(error)) => error
            .code()
            .is_some_and(|code| code.starts_with("22") || code.starts_with("23")),
        Err(_) => false,
    }
}
