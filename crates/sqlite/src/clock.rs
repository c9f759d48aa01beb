//! `unix_ms_now()`: the system clock in SQL, as unix milliseconds, on every
//! connection a [`Database`](crate::Database) opens.
//!
//! It is what `CAST(unixepoch('subsec') * 1000 AS INTEGER)` returns (the
//! same clock, truncated to the millisecond the same way) at a fraction of
//! its cost: SQLite's date functions parse their modifiers and build a
//! Julian day on every call, and a store that stamps each row it writes
//! pays that several times per request on its one writer thread.
//!
//! Unlike `unixepoch('now')`, which SQLite holds still for the length of
//! one statement, each call reads the clock: two calls in one statement can
//! differ by the time between them.

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

/// Adds [`UNIX_MS_NOW`] to `conn`. Not deterministic (so SQLite calls it
/// each time), innocuous (it reads nothing of the database).
pub(crate) fn register(conn: &Connection) -> rusqlite::Result<()> {
    conn.create_scalar_function(
        UNIX_MS_NOW,
        0,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_INNOCUOUS,
        |_| Ok(unix_ms_now()),
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

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
