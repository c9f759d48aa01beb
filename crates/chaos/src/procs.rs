//! The processes of a run (`chargeonce acquirer`, `chargeonce serve`): started
//! on fixed ports so a restarted instance comes back where its proxy expects
//! it, killed with SIGKILL, frozen with SIGSTOP, and always killed on drop.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::ChaosError;

/// A port free right now (bound, then released).
pub fn free_port() -> Result<u16, ChaosError> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(|e| ChaosError::Setup(format!("finding a free port: {e}")))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| ChaosError::Setup(format!("finding a free port: {e}")))
}

/// One child process of the run.
#[derive(Debug)]
pub struct Proc {
    /// A label for reports and the log file's name.
    pub name: String,
    /// The port it listens on.
    pub port: u16,
    program: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
    log: PathBuf,
    child: Option<Child>,
}

impl Proc {
    /// A process of `program ARGS` listening on `port`, logging to
    /// `work/NAME.log`; not started yet.
    pub fn new(name: &str, port: u16, program: &Path, args: Vec<String>, work: &Path) -> Self {
        Self {
            name: name.to_owned(),
            port,
            program: program.to_owned(),
            args,
            env: Vec::new(),
            log: work.join(format!("{name}.log")),
            child: None,
        }
    }

    /// Sets an environment variable of the process (for secrets, which do not
    /// belong on a command line).
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Starts it and waits until it says it listens on its port (its
    /// `listening on http://127.0.0.1:PORT` line, in its log after the start)
    /// and `GET /healthz` answers 200. The line comes first because another
    /// process may hold the port: its `/healthz` would answer for ours,
    /// which then dies on its bind, and the run would talk to a stranger.
    pub async fn start(&mut self, http: &reqwest::Client) -> Result<(), ChaosError> {
        let logged_before = std::fs::metadata(&self.log).map_or(0, |m| m.len());
        let open = || {
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.log)
                .map_err(|e| ChaosError::Setup(format!("log {}: {e}", self.log.display())))
        };
        let child = Command::new(&self.program)
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .env(
                "RUST_LOG",
                std::env::var("CHAOS_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdin(Stdio::null())
            .stdout(open()?)
            .stderr(open()?)
            .spawn()
            .map_err(|e| ChaosError::Setup(format!("starting {}: {e}", self.name)))?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(60);
        let url = format!("{}/healthz", self.base());
        loop {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                self.child = None;
                return Err(ChaosError::Setup(format!(
                    "{} exited while starting ({status}); see {}",
                    self.name,
                    self.log.display()
                )));
            }
            let ready = self.said_listening(logged_before)
                && http
                    .get(&url)
                    .timeout(Duration::from_secs(2))
                    .send()
                    .await
                    .is_ok_and(|r| r.status().is_success());
            if ready {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(ChaosError::Setup(format!(
                    "{} did not become healthy in 60 s; see {}",
                    self.name,
                    self.log.display()
                )));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Whether the log, past its first `from` bytes, has this process's
    /// `listening on http://127.0.0.1:PORT` line.
    fn said_listening(&self, from: u64) -> bool {
        let Ok(log) = std::fs::read(&self.log) else {
            return false;
        };
        let start = usize::try_from(from).unwrap_or(usize::MAX).min(log.len());
        let line = format!("listening on http://127.0.0.1:{}", self.port);
        String::from_utf8_lossy(&log[start..]).contains(&line)
    }

    /// SIGKILL (what `Child::kill` sends on unix), then reap.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Sends a signal by name (`STOP`, `CONT`) with `kill(1)`.
    pub fn signal(&self, signal: &str) -> Result<(), ChaosError> {
        let Some(child) = self.child.as_ref() else {
            return Err(ChaosError::Setup(format!("{} is not running", self.name)));
        };
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(child.id().to_string())
            .status()
            .map_err(|e| ChaosError::Setup(format!("kill -{signal}: {e}")))?;
        if status.success() {
            Ok(())
        } else {
            Err(ChaosError::Setup(format!(
                "kill -{signal} {} failed",
                self.name
            )))
        }
    }

    /// Whether the process is running (not killed, not exited).
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_ref() {
            // A frozen process must be resumed to die promptly.
            let _ = Command::new("kill")
                .arg("-CONT")
                .arg(child.id().to_string())
                .status();
        }
        self.kill();
    }
}
