//! The reader threads: read-only connections that take read closures from
//! one shared queue, so a slow read never holds up the writer.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

use rusqlite::{Connection, OpenFlags};
use tokio::sync::oneshot;

use crate::clock::at_one_instant;

use crate::{Failure, Location, OpenError, Options, connect, panic_message};

/// What the readers' queue carries.
pub(crate) enum Message {
    /// A read to run.
    Read(Box<dyn Task>),
    /// One reader stops.
    Stop,
}

/// A queued read, type-erased.
pub(crate) trait Task: Send {
    /// Runs the read and answers the caller.
    fn run(self: Box<Self>, conn: &Connection);
}

/// A read closure with its reply channel.
pub(crate) struct ReadTask<F, T, E> {
    work: F,
    reply: oneshot::Sender<Result<T, E>>,
}

impl<F, T, E> ReadTask<F, T, E>
where
    F: FnOnce(&Connection) -> Result<T, E> + Send + 'static,
    T: Send + 'static,
    E: From<Failure> + Send + 'static,
{
    /// A task and the receiver of its answer.
    pub(crate) fn new(work: F) -> (Self, oneshot::Receiver<Result<T, E>>) {
        let (reply, answer) = oneshot::channel();
        (Self { work, reply }, answer)
    }
}

impl<F, T, E> Task for ReadTask<F, T, E>
where
    F: FnOnce(&Connection) -> Result<T, E> + Send + 'static,
    T: Send + 'static,
    E: From<Failure> + Send + 'static,
{
    fn run(self: Box<Self>, conn: &Connection) {
        let work = self.work;
        let answer = match catch_unwind(AssertUnwindSafe(|| at_one_instant(|| work(conn)))) {
            Ok(answer) => answer,
            Err(panic) => {
                let message = panic_message(panic.as_ref());
                tracing::error!(%message, "an SQLite read panicked");
                Err(E::from(Failure::Panicked(message)))
            }
        };
        let _ = self.reply.send(answer);
    }
}

/// A read-only connection with the readers' page cache
/// ([`Options::reader_cache_kib`]).
fn open_reader(location: &Location, options: &Options) -> Result<Connection, OpenError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = connect(location, flags, options)?;
    conn.pragma_update(None, "cache_size", -i64::from(options.reader_cache_kib))
        .map_err(|source| OpenError::Sqlite {
            path: location.path(),
            source,
        })?;
    Ok(conn)
}

/// Opens `options.readers` read-only connections, each on its own thread.
pub(crate) async fn spawn(
    path: &Path,
    options: &Options,
) -> Result<flume::Sender<Message>, OpenError> {
    let (sender, queue) = flume::unbounded::<Message>();
    for n in 0..options.readers {
        let (ready, opened) = oneshot::channel();
        let location = Location::File(path.to_owned());
        let options = options.clone();
        let queue = queue.clone();
        std::thread::Builder::new()
            .name(format!("sqlite-reader-{n}"))
            .spawn(move || {
                let conn = match open_reader(&location, &options) {
                    Ok(conn) => conn,
                    Err(error) => {
                        let _ = ready.send(Err(error));
                        return;
                    }
                };
                let _ = ready.send(Ok(()));
                while let Ok(Message::Read(task)) = queue.recv() {
                    task.run(&conn);
                }
            })?;
        match opened.await {
            Ok(result) => result?,
            Err(_) => {
                return Err(OpenError::Thread(std::io::Error::other(
                    "an SQLite reader thread ended while opening",
                )));
            }
        }
    }
    Ok(sender)
}
