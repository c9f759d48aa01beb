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

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chargeonce_core::store::{PoolUse, WaitHistogram};

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
    /// How long each [`Connections::take`] waited.
    waits: Waits,
}

/// The upper bounds of the acquire-wait buckets, in seconds: 100 µs
/// doubling to about 3.3 s, then infinity (the acquire timeout ends a wait).
const WAIT_BOUNDS: [f64; 16] = [
    0.0001, 0.0002, 0.0004, 0.0008, 0.0016, 0.0032, 0.0064, 0.0128, 0.0256, 0.0512, 0.1024, 0.2048,
    0.4096, 0.8192, 1.6384, 3.2768,
];

/// A histogram of the waits for a connection: an atomic add or two per
/// statement, read at a scrape.
#[derive(Debug, Default)]
struct Waits {
    /// One per bound of [`WAIT_BOUNDS`], and the last for waits above them.
    buckets: [AtomicU64; WAIT_BOUNDS.len() + 1],
    count: AtomicU64,
    sum_nanos: AtomicU64,
}

impl Waits {
    fn observe(&self, wait: Duration) {
        let seconds = wait.as_secs_f64();
        let bucket = WAIT_BOUNDS
            .iter()
            .position(|bound| seconds <= *bound)
            .unwrap_or(WAIT_BOUNDS.len());
        if let Some(counter) = self.buckets.get(bucket) {
            counter.fetch_add(1, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(wait.as_nanos()).unwrap_or(u64::MAX);
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    fn histogram(&self) -> WaitHistogram {
        let buckets = WAIT_BOUNDS
            .iter()
            .copied()
            .chain(std::iter::once(f64::INFINITY))
            .zip(&self.buckets)
            .map(|(bound, counter)| (bound, counter.load(Ordering::Relaxed)))
            .collect();
        WaitHistogram {
            buckets,
            count: self.count.load(Ordering::Relaxed),
            sum_seconds: Duration::from_nanos(self.sum_nanos.load(Ordering::Relaxed)).as_secs_f64(),
        }
    }
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
            waits: Waits::default(),
        }
    }

    /// The connections now (a parked one counts as idle: the next statement
    /// takes it), the pool's maximum, and the waits for one so far.
    pub(super) fn usage(&self) -> PoolUse {
        let parked = self.parked.lock().map(|p| p.len()).unwrap_or(0);
        let open = u64::from(self.pool.size());
        let idle = u64::try_from(self.pool.num_idle().saturating_add(parked))
            .unwrap_or(u64::MAX)
            .min(open);
        PoolUse {
            idle,
            in_use: open - idle,
            max: u64::from(self.pool.options().get_max_connections()),
            acquire_wait: self.waits.histogram(),
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
    /// Each call's wait is counted ([`Connections::usage`]): none when a
    /// parked connection was there, else from the call to the connection or
    /// the timeout.
    pub(super) async fn take(self: &Arc<Self>) -> Result<PoolConnection<Postgres>, sqlx::Error> {
        // The common case under load, with no timer and no wait registered.
        if let Some(conn) = self.unpark() {
            self.waits.observe(Duration::ZERO);
            return Ok(conn);
        }
        let started = Instant::now();
        let taken = tokio::time::timeout(self.acquire_timeout, self.wait_for_one())
            .await
            .unwrap_or(Err(sqlx::Error::PoolTimedOut));
        self.waits.observe(started.elapsed());
        taken
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
