//! `unix_ms_now()`: the system clock in SQL, as unix milliseconds, on every
//! connection a [`Database`](crate::Database) opens.
//!
//! It is what `CAST(unixepoch('subsec') * 1000 AS INTEGER)` returns (the
//! same clock, truncated to the millisecond the same way) at a fraction of
//! its cost: SQLite's date functions parse their modifiers and build a
//! Julian day on every call, and a store that stamps each row it writes
//! pays that several times per request on its one writer thread.
//!
//! Like `unixepoch('now')`, which SQLite holds still for the length of one
//! statement, it does not move while one closure of a
//! [`Database`](crate::Database) runs: every call in one write or read
//! returns the instant the closure started ([`at_one_instant`]), so a
//! statement that stamps two columns, or a write that stamps two rows,
//! stamps them alike. Outside a closure each call reads the clock.

use std::cell::Cell;
use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::Connection;
use rusqlite::functions::FunctionFlags;

/// The function's name in SQL.
pub const UNIX_MS_NOW: &str = "unix_ms_now";

/// The system clock in unix milliseconds (0 before 1970, `i64::MAX` past
/// the year 292 million).
pub fn unix_ms_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
        })
}

thread_local! {
    /// The instant of the closure running on this thread, if one is.
    static INSTANT: Cell<Option<i64>> = const { Cell::new(None) };
}

/// Runs `work` (one closure of a write or a read) with the SQL clock held
/// at the instant it starts; the clock is released when it returns or
/// unwinds.
pub(crate) fn at_one_instant<T>(work: impl FnOnce() -> T) -> T {
    struct Release(Option<i64>);
    impl Drop for Release {
        fn drop(&mut self) {
            INSTANT.with(|instant| instant.set(self.0));
        }
    }
    let _release = Release(INSTANT.with(|instant| instant.replace(Some(unix_ms_now()))));
    work()
}

/// What `unix_ms_now()` returns on this thread: the running closure's
/// instant, else the clock.
fn sql_now() -> i64 {
    INSTANT.with(Cell::get).unwrap_or_else(unix_ms_now)
}

/// Adds [`UNIX_MS_NOW`] to `conn`. Not deterministic (so SQLite calls it
/// each time: it is the closure's instant, not a constant), innocuous (it
/// reads nothing of the database).
pub(crate) fn register(conn: &Connection) -> rusqlite::Result<()> {
    conn.create_scalar_function(
        UNIX_MS_NOW,
        0,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_INNOCUOUS,
        |_| Ok(sql_now()),
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Within one closure the clock stands still, in one statement and
    /// across statements; after it, it moves again.
    #[test]
    fn one_closure_is_one_instant() {
        let conn = Connection::open_in_memory().unwrap();
        register(&conn).unwrap();
        let read = |sql: &str| -> (i64, i64) {
            conn.query_row(sql, [], |row| Ok((row.get(0)?, row.get(1)?)))
                .unwrap()
        };
        let (held, first, second, later) = at_one_instant(|| {
            let held = INSTANT.with(Cell::get).unwrap();
            let (first, second) = read("SELECT unix_ms_now(), unix_ms_now()");
            std::thread::sleep(std::time::Duration::from_millis(3));
            let (later, _) = read("SELECT unix_ms_now(), 0");
            (held, first, second, later)
        });
        assert_eq!((first, second, later), (held, held, held));
        assert_eq!(INSTANT.with(Cell::get), None);
        std::thread::sleep(std::time::Duration::from_millis(3));
        let (after, _) = read("SELECT unix_ms_now(), 0");
        assert!(after > held, "{after} {held}");
    }

    /// The function and SQLite's own clock agree, to the millisecond
    /// (give or take the time between the two reads).
    #[test]
    fn it_reads_the_clock_sqlite_reads() {
        let conn = Connection::open_in_memory().unwrap();
        register(&conn).unwrap();
        let (before, ours, theirs, after): (i64, i64, i64, i64) = {
            let before = unix_ms_now();
            let (ours, theirs) = conn
                .query_row(
                    "SELECT unix_ms_now(), CAST(unixepoch('subsec') * 1000 AS INTEGER)",
                    [],
                    |row| Ok((row.get(0)?, row.get(1)?)),
                )
                .unwrap();
            (before, ours, theirs, unix_ms_now())
        };
        assert!(before <= ours && ours <= after, "{before} {ours} {after}");
        assert!(
            before <= theirs && theirs <= after,
            "{before} {theirs} {after}"
        );
    }
}
