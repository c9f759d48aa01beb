//! The run's PostgreSQL: a private cluster started for the run (so that its
//! `-m immediate` restart disturbs nobody else on the machine), or a database
//! given by URL with a command that restarts it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::ChaosError;

/// The PostgreSQL of a run.
#[derive(Debug)]
pub struct Postgres {
    /// The database URL the instances use.
    pub url: String,
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    Private(Private),
    External { restart: Option<String> },
}

#[derive(Debug)]
struct Private {
    bindir: PathBuf,
    data: PathBuf,
    log: PathBuf,
    options: String,
    /// `Some("postgres")` when running as root (PostgreSQL refuses root).
    run_as: Option<String>,
}

impl Private {
    fn pg_ctl(&self, args: &[&str]) -> Result<(), ChaosError> {
        let program = self.bindir.join("pg_ctl");
        let mut command = match &self.run_as {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--"]).arg(&program);
                c
            }
            None => Command::new(&program),
        };
        command
            .arg("-D")
            .arg(&self.data)
            .arg("-l")
            .arg(&self.log)
            .args(["-o", &self.options])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        run(command, "pg_ctl")
    }
}

fn run(mut command: Command, what: &str) -> Result<(), ChaosError> {
    let status = command
        .status()
        .map_err(|e| ChaosError::Setup(format!("running {what}: {e}")))?;
    if status.success() {
        Ok(())
    } else {
        Err(ChaosError::Setup(format!("{what} failed: {status}")))
    }
}

/// Where `initdb` and `pg_ctl` live: the newest `/usr/lib/postgresql/*/bin`,
/// else the `PATH`.
fn bindir() -> Option<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin)
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

impl Postgres {
    /// `initdb` a cluster under `work` and start it on `port`.
    pub fn private(work: &Path, port: u16) -> Result<Self, ChaosError> {
        let bindir = bindir().ok_or_else(|| {
            ChaosError::Setup(
                "no PostgreSQL server binaries under /usr/lib/postgresql (or pass --database-url)"
                    .into(),
            )
        })?;
        let run_as = is_root().then(|| "postgres".to_owned());
        let data = work.join("pg");
        std::fs::create_dir_all(&data)
            .map_err(|e| ChaosError::Setup(format!("creating {}: {e}", data.display())))?;
        if let Some(user) = &run_as {
            // The directories above must be passable by the postgres user.
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(work, std::fs::Permissions::from_mode(0o755));
            let mut chown = Command::new("chown");
            chown.arg("-R").arg(format!("{user}:")).arg(&data);
            run(chown, "chown")?;
            let mut chmod = Command::new("chmod");
            chmod.arg("700").arg(&data);
            run(chmod, "chmod")?;
        }
        let mut initdb = match &run_as {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--"]).arg(bindir.join("initdb"));
                c
            }
            None => Command::new(bindir.join("initdb")),
        };
        initdb
            .arg("-D")
            .arg(&data)
            .args([
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-instructions",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        run(initdb, "initdb")?;
        let private = Private {
            bindir,
            log: data.join("server.log"),
            options: format!(
                "-p {port} -k {} -c listen_addresses=127.0.0.1 -c max_connections=400",
                data.display()
            ),
            data,
            run_as,
        };
        private.pg_ctl(&["-w", "-t", "60", "start"])?;
        Ok(Self {
            url: format!("postgres://postgres@127.0.0.1:{port}/postgres"),
            kind: Kind::Private(private),
        })
    }

    /// A database given by URL, restarted (if at all) by `restart` (`sh -c`).
    pub fn external(url: String, restart: Option<String>) -> Self {
        Self {
            url,
            kind: Kind::External { restart },
        }
    }

    /// Whether this run can restart PostgreSQL.
    pub fn can_restart(&self) -> bool {
        match &self.kind {
            Kind::Private(_) => true,
            Kind::External { restart } => restart.is_some(),
        }
    }

    /// Stops PostgreSQL with `-m immediate` (no checkpoint, as in a crash) and
    /// starts it again; returns how long it was down.
    pub fn restart_immediate(&self) -> Result<Duration, ChaosError> {
        let started = Instant::now();
        match &self.kind {
            Kind::Private(private) => {
                private.pg_ctl(&["-m", "immediate", "-w", "-t", "60", "restart"])?;
            }
            Kind::External { restart: Some(cmd) } => {
                let mut command = Command::new("sh");
                command.arg("-c").arg(cmd).stdin(Stdio::null());
                run(command, "--pg-restart-command")?;
            }
            Kind::External { restart: None } => {
                return Err(ChaosError::Setup(
                    "no --pg-restart-command for the external database".into(),
                ));
            }
        }
        Ok(started.elapsed())
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        if let Kind::Private(private) = &self.kind {
            let _ = private.pg_ctl(&["-m", "immediate", "-w", "stop"]);
        }
    }
}
