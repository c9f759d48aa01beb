//! The tap between one instance and the acquirer: a pass-through TCP proxy
//! that, when armed, catches the acquirer's answer to a charge (sent only
//! after the acquirer committed it) and asks the harness to SIGKILL the
//! instance before the answer reaches it: a crash between the acquirer's
//! commit and ours.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::error::ChaosError;

/// An armed tap saw the acquirer's answer to a charge of `instance`: kill it,
/// then answer `done`.
#[derive(Debug)]
pub struct CommitSeen {
    /// The instance whose charge was committed.
    pub instance: usize,
    /// Answer once the instance is dead; the tap then drops the answer.
    pub done: oneshot::Sender<()>,
}

/// One tap, between one instance and the acquirer.
#[derive(Debug)]
pub struct Tap {
    /// The port the instance sends its acquirer requests to.
    pub port: u16,
    armed: Arc<AtomicBool>,
    task: JoinHandle<()>,
}

impl Tap {
    /// Listens on a free port and forwards to `127.0.0.1:acquirer`.
    pub async fn start(
        instance: usize,
        acquirer: u16,
        seen: mpsc::UnboundedSender<CommitSeen>,
    ) -> Result<Self, ChaosError> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| ChaosError::Setup(format!("binding a tap: {e}")))?;
        let port = listener
            .local_addr()
            .map_err(|e| ChaosError::Setup(format!("tap address: {e}")))?
            .port();
        let armed = Arc::new(AtomicBool::new(false));
        let trigger = armed.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    continue;
                };
                tokio::spawn(relay(
                    client,
                    acquirer,
                    instance,
                    trigger.clone(),
                    seen.clone(),
                ));
            }
        });
        Ok(Self { port, armed, task })
    }

    /// The next answer to a charge kills the instance.
    pub fn arm(&self) {
        self.armed.store(true, Ordering::SeqCst);
    }

    /// Disarms; `true` when it was still armed (no charge came through).
    pub fn disarm(&self) -> bool {
        self.armed.swap(false, Ordering::SeqCst)
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for Tap {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn relay(
    client: TcpStream,
    acquirer: u16,
    instance: usize,
    armed: Arc<AtomicBool>,
    seen: mpsc::UnboundedSender<CommitSeen>,
) {
    let Ok(server) = TcpStream::connect(("127.0.0.1", acquirer)).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    // Whether the request last sent on this connection is a charge.
    let charging = Arc::new(AtomicBool::new(false));
    let marks = charging.clone();
    let upstream = tokio::spawn(async move {
        let mut buf = vec![0_u8; 16 * 1024];
        loop {
            let n = match client_read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let chunk = &buf[..n];
            if chunk.starts_with(b"POST ") || chunk.starts_with(b"GET ") {
                marks.store(chunk.starts_with(b"POST /v1/charges "), Ordering::SeqCst);
            }
            if server_write.write_all(chunk).await.is_err() {
                break;
            }
        }
        let _ = server_write.shutdown().await;
    });
    let mut buf = vec![0_u8; 16 * 1024];
    loop {
        let n = match server_read.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if charging.load(Ordering::SeqCst) && armed.swap(false, Ordering::SeqCst) {
            let (done, killed) = oneshot::channel();
            if seen.send(CommitSeen { instance, done }).is_ok() {
                let _ = killed.await;
            }
            break;
        }
        if client_write.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    upstream.abort();
}
