//! The run's PostgreSQL: a private cluster started for the run (so that its
//! `-m immediate` restart disturbs nobody else on the machine), a
//! highly available one (`--pg-ha`: deploy/ha/cluster, Patroni over etcd
//! behind HAProxy, whose leader the nemesis kills), or a database given by
//! URL with a command that restarts it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::ChaosError;

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
    Ha(Ha),
    External {
        restart: Option<String>,
    },
    /// Not PostgreSQL: an SQLite file (`--store sqlite`), never restarted.
    Sqlite,
}

/// deploy/ha/cluster, written into the run's folder from the copy compiled
/// into the binary (so an installed `chargeonce` needs no source tree).
#[derive(Debug)]
struct Ha {
    script: PathBuf,
    run_dir: PathBuf,
    options: HaOptions,
}

/// How the HA cluster is run and failed over.
#[derive(Debug, Clone, Copy)]
pub struct HaOptions {
    /// HAProxy's port; the nodes and etcd use the next 80.
    pub base_port: u16,
    /// A failover kills the leader's Patroni too (the loss of a whole node).
    pub with_patroni: bool,
    /// Sabotage: replication asynchronous, and the leader's WAL held back
    /// from the replicas for 2 s before each kill.
    pub async_replication: bool,
}

/// The files of deploy/ha, as compiled in.
const HA_FILES: [(&str, &str); 3] = [
    ("cluster", include_str!("../../../deploy/ha/cluster")),
    (
        "patroni.yml.in",
        include_str!("../../../deploy/ha/patroni.yml.in"),
    ),
    (
        "haproxy.cfg.in",
        include_str!("../../../deploy/ha/haproxy.cfg.in"),
    ),
];

impl Ha {
    /// Runs `cluster ARGS...` and returns its standard output.
    fn cluster(&self, args: &[&str]) -> Result<String, ChaosError> {
        let output = Command::new("bash")
            .arg(&self.script)
            .args(args)
            .env("HA_DIR", &self.run_dir)
            .env("HA_BASE_PORT", self.options.base_port.to_string())
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()
            .map_err(|e| ChaosError::Setup(format!("running deploy/ha/cluster: {e}")))?;
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
        } else {
            Err(ChaosError::Setup(format!(
                "deploy/ha/cluster {} failed: {} (logs in {})",
                args.join(" "),
                output.status,
                self.run_dir.display()
            )))
        }
    }
}

/// One leader freeze, as the nemesis saw it: the leader's Patroni and
/// PostgreSQL SIGSTOPped past the leader key's `ttl`, another node promoted
/// and taking writes, then the old leader SIGCONTed.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LeaderFreeze {
    /// The node that was frozen (the leader then).
    pub victim: String,
    /// How long it stayed frozen, in milliseconds.
    pub frozen_ms: u64,
    /// The leader key's `ttl` of the cluster's configuration, in seconds.
    pub ttl_s: u64,
    /// The node promoted while it was frozen.
    pub promoted: String,
    /// From the freeze to the promoted node showing as leader in Patroni's
    /// `/cluster`, in milliseconds.
    pub freeze_to_promotion_ms: u64,
    /// From the freeze to the first write committed through HAProxy, in
    /// milliseconds.
    pub freeze_to_first_write_ms: u64,
    /// What the old leader did once resumed, from its Patroni log and
    /// `/cluster`: demoted, rewound, rejoined as a replica (or took the
    /// leader key back, which fails the run).
    pub on_resume: String,
    /// From the SIGCONT to the old leader running as a replica again, in
    /// milliseconds (`None` if it did not within 120 s).
    pub resume_to_replica_ms: Option<u64>,
    /// When it was frozen.
    #[serde(skip)]
    pub frozen_at: Instant,
}

/// One etcd member killed, as the nemesis saw it: with two of three members
/// left, a leader election must still work.
#[derive(Debug, Clone, serde::Serialize)]
pub struct EtcdMemberKill {
    /// The etcd member killed (`etcd1`..`etcd3`; etcd's own leader then).
    pub member: String,
    /// Members answering healthy while it was down.
    pub healthy_left: u32,
    /// The PostgreSQL leader killed while the member was down.
    pub pg_victim: String,
    /// The node elected then.
    pub pg_leader: String,
    /// From the PostgreSQL leader's kill to the first write through HAProxy,
    /// in milliseconds.
    pub to_first_write_ms: u64,
    /// From the member's restart to all three answering healthy, in milliseconds.
    pub member_back_ms: u64,
}

/// One leader failover, as the nemesis saw it.
#[derive(Debug, Clone)]
pub struct Failover {
    /// The node whose PostgreSQL was killed.
    pub victim: String,
    /// The node that leads afterwards.
    pub leader: String,
    /// From the kill to the first write committed through HAProxy.
    pub to_first_write: Duration,
    /// When the leader was killed.
    pub killed: Instant,
}

/// SIGCONTs a frozen node when dropped, whatever happened meanwhile.
struct FreezeGuard<'a> {
    ha: &'a Ha,
    node: &'a str,
}

impl Drop for FreezeGuard<'_> {
    fn drop(&mut self) {
        let _ = self.ha.cluster(&["thaw", self.node]);
    }
}

/// Restarts a killed etcd member when dropped (on an early return).
struct EtcdGuard<'a> {
    ha: &'a Ha,
    index: &'a str,
}

impl Drop for EtcdGuard<'_> {
    fn drop(&mut self) {
        let _ = self.ha.cluster(&["revive-etcd-member", self.index]);
    }
}

/// The leader key's `ttl` in seconds, from the compiled-in patroni.yml.in
/// (30, Patroni's default, if it sets none).
pub fn leader_ttl() -> u64 {
    ttl_of(HA_FILES[1].1).unwrap_or(30)
}

fn ttl_of(yaml: &str) -> Option<u64> {
    yaml.lines()
        .map(str::trim)
        .find_map(|l| l.strip_prefix("ttl:"))
        .and_then(|v| v.trim().parse().ok())
}

/// What `path` holds from byte `from` on (empty if it cannot be read).
fn read_from(path: &Path, from: u64) -> String {
    std::fs::read(path)
        .map(|bytes| {
            let from = usize::try_from(from).unwrap_or(usize::MAX).min(bytes.len());
            String::from_utf8_lossy(&bytes[from..]).into_owned()
        })
        .unwrap_or_default()
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
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

/// What the private cluster's log says of each message, so that the run
/// can tell what the service caused ([`crate::pglog`]): the SQLSTATE and
/// the application (`chargeonce` for the service's connections), and the
/// statement behind every warning and error.
const LOG_SETTINGS: &str = "\n# chargeonce chaos: what the run reads in the server log\n\
log_line_prefix = '%m [%p] %e %a: '\n\
log_min_error_statement = warning\n";

fn append_settings(conf: &Path) -> Result<(), ChaosError> {
    use std::io::Write as _;
    std::fs::OpenOptions::new()
        .append(true)
        .open(conf)
        .and_then(|mut file| file.write_all(LOG_SETTINGS.as_bytes()))
        .map_err(|e| ChaosError::Setup(format!("writing {}: {e}", conf.display())))
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
        append_settings(&data.join("postgresql.conf"))?;
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

    /// The server log of a private cluster, which the run reads afterwards
    /// ([`crate::pglog`]); `None` for an external or HA database.
    pub fn log(&self) -> Option<&Path> {
        match &self.kind {
            Kind::Private(private) => Some(&private.log),
            Kind::Ha(_) | Kind::External { .. } | Kind::Sqlite => None,
        }
    }

    /// Starts deploy/ha/cluster under `work` (etcd, three PostgreSQL nodes
    /// under Patroni with synchronous replication, HAProxy on the base port)
    /// and waits for a leader with a synchronous standby.
    pub fn ha(work: &Path, options: HaOptions) -> Result<Self, ChaosError> {
        let dir = work.join("ha");
        std::fs::create_dir_all(&dir)
            .map_err(|e| ChaosError::Setup(format!("creating {}: {e}", dir.display())))?;
        for (name, text) in HA_FILES {
            std::fs::write(dir.join(name), text)
                .map_err(|e| ChaosError::Setup(format!("writing deploy/ha/{name}: {e}")))?;
        }
        // The postgres user (as root) must pass through the run's folders.
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(work, std::fs::Permissions::from_mode(0o755));
        let ha = Ha {
            script: dir.join("cluster"),
            run_dir: dir.join("run"),
            options,
        };
        ha.cluster(&["start"])?;
        if options.async_replication {
            ha.cluster(&["sabotage-async"])?;
            // Patroni applies a configuration change on its next loop.
            std::thread::sleep(Duration::from_secs(3));
        }
        let url = ha.cluster(&["url"])?;
        Ok(Self {
            url,
            kind: Kind::Ha(ha),
        })
    }

    /// Whether this run's PostgreSQL has a leader to kill.
    pub fn can_fail_over(&self) -> bool {
        matches!(self.kind, Kind::Ha(_))
    }

    /// SIGKILLs the leader's postgres (and its Patroni, if the cluster was
    /// started so, making the election wait for the leader key to expire),
    /// waits for the first write through HAProxy, brings a killed Patroni
    /// back (the old leader rejoins as a replica), and waits until the
    /// cluster has a synchronous standby again.
    pub fn fail_over(&self) -> Result<Failover, ChaosError> {
        let Kind::Ha(ha) = &self.kind else {
            return Err(ChaosError::Setup("failover needs --pg-ha".into()));
        };
        let with_patroni = ha.options.with_patroni;
        let killed = Instant::now();
        let victim = if ha.options.async_replication {
            ha.cluster(&["kill-leader", "--lagging", "2"])?
        } else if with_patroni {
            ha.cluster(&["kill-leader", "--with-patroni"])?
        } else {
            ha.cluster(&["kill-leader"])?
        };
        ha.cluster(&["wait-leader", "120"])?;
        let to_first_write = killed.elapsed();
        let leader = ha.cluster(&["leader"])?;
        if with_patroni {
            ha.cluster(&["revive", &victim])?;
        }
        if !ha.options.async_replication {
            // Without a synchronous standby, strict mode would stall writes.
            ha.cluster(&["wait-ready", "120"])?;
        }
        Ok(Failover {
            victim,
            leader,
            to_first_write,
            killed,
        })
    }

    /// Freezes the leader (its Patroni, postmaster and backends SIGSTOPped:
    /// a silent host) for at least the leader key's `ttl` plus 5 s and
    /// until another node leads and a write commits through HAProxy, then
    /// SIGCONTs it and follows what it does: Patroni with the leader-key fix
    /// finds its key taken, demotes its PostgreSQL, rewinds it if needed and
    /// rejoins as a replica. Waits until the cluster has a synchronous
    /// standby again. A resumed leader that takes the key back is an error.
    pub fn freeze_leader(&self) -> Result<LeaderFreeze, ChaosError> {
        let Kind::Ha(ha) = &self.kind else {
            return Err(ChaosError::Setup("a leader freeze needs --pg-ha".into()));
        };
        let ttl = leader_ttl();
        let frozen_at = Instant::now();
        let victim = ha.cluster(&["freeze-leader"])?;
        let thawed = FreezeGuard { ha, node: &victim };
        let mut promoted = None;
        while frozen_at.elapsed() < Duration::from_secs(ttl + 120) {
            let now = ha.cluster(&["leader"]).unwrap_or_default();
            if !now.is_empty() && now != victim {
                promoted = Some((now, frozen_at.elapsed()));
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let Some((promoted, to_promotion)) = promoted else {
            return Err(ChaosError::Setup(format!(
                "leader freeze: no node was promoted while {victim} was frozen ({}s)",
                ttl + 120
            )));
        };
        ha.cluster(&["wait-leader", "120"])?;
        let to_first_write = frozen_at.elapsed();
        let at_least = Duration::from_secs(ttl + 5);
        if let Some(rest) = at_least.checked_sub(frozen_at.elapsed()) {
            std::thread::sleep(rest);
        }
        let log = ha.run_dir.join(format!("{victim}.log"));
        let log_from = std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
        let frozen = frozen_at.elapsed();
        drop(thawed);
        let resumed = Instant::now();
        let mut took_back = false;
        let mut replica = None;
        while resumed.elapsed() < Duration::from_secs(120) {
            let members = ha.cluster(&["members"]).unwrap_or_default();
            let me = members
                .lines()
                .find(|l| l.split_whitespace().next() == Some(victim.as_str()));
            if let Some(line) = me {
                let mut fields = line.split_whitespace().skip(1);
                let role = fields.next().unwrap_or("");
                let state = fields.next().unwrap_or("");
                let timeline = fields.next().unwrap_or("-");
                if role == "leader" {
                    took_back = true;
                    break;
                }
                if matches!(role, "replica" | "sync_standby")
                    && matches!(state, "running" | "streaming")
                {
                    replica = Some((role.to_owned(), timeline.to_owned(), resumed.elapsed()));
                    break;
                }
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let said = read_from(&log, log_from);
        let mut did = Vec::new();
        if said.contains("Demoting self") || said.contains("demote") {
            did.push("demoted its PostgreSQL".to_owned());
        }
        if said.contains("pg_rewind") || said.contains("rewind") {
            did.push("rewound (pg_rewind)".to_owned());
        }
        let on_resume = match (&replica, took_back) {
            (_, true) => format!("{victim} took the leader key back from {promoted}"),
            (Some((role, timeline, after)), false) => {
                did.push(format!(
                    "rejoined as {role} on timeline {timeline} after {:.1} s",
                    after.as_secs_f64()
                ));
                did.join(", ")
            }
            (None, false) => {
                did.push("did not rejoin as a replica within 120 s".to_owned());
                did.join(", ")
            }
        };
        if took_back {
            return Err(ChaosError::Setup(format!(
                "leader freeze: the resumed {victim} took the leader key back from {promoted} (the leader key overwrite of Patroni before 3.1.0)"
            )));
        }
        if replica.is_none() {
            return Err(ChaosError::Setup(format!(
                "leader freeze: {victim} {on_resume} (logs in {})",
                ha.run_dir.display()
            )));
        }
        ha.cluster(&["wait-ready", "120"])?;
        Ok(LeaderFreeze {
            victim,
            frozen_ms: millis(frozen),
            ttl_s: ttl,
            promoted,
            freeze_to_promotion_ms: millis(to_promotion),
            freeze_to_first_write_ms: millis(to_first_write),
            on_resume,
            resume_to_replica_ms: replica.map(|(_, _, after)| millis(after)),
            frozen_at,
        })
    }

    /// Kills etcd's leader member (SIGKILL), and with two of the three
    /// members left kills the PostgreSQL leader: the election must still
    /// work. Then restarts the member and waits until all three are healthy
    /// and the cluster has a synchronous standby again.
    pub fn kill_etcd_member(&self) -> Result<EtcdMemberKill, ChaosError> {
        let Kind::Ha(ha) = &self.kind else {
            return Err(ChaosError::Setup(
                "an etcd member kill needs --pg-ha".into(),
            ));
        };
        let index = ha.cluster(&["kill-etcd-member"])?;
        let member = format!("etcd{index}");
        let revive = EtcdGuard { ha, index: &index };
        // etcd elects a new leader among the two left (election timeout 1 s).
        let mut healthy_left = 0;
        for _ in 0..100 {
            healthy_left = ha
                .cluster(&["etcd-health"])
                .ok()
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            if healthy_left >= 2 {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let killed = Instant::now();
        let pg_victim = ha.cluster(&["kill-leader"])?;
        ha.cluster(&["wait-leader", "120"])?;
        let to_first_write = killed.elapsed();
        let pg_leader = ha.cluster(&["leader"])?;
        std::mem::forget(revive);
        let back = Instant::now();
        ha.cluster(&["revive-etcd-member", &index])?;
        let member_back = back.elapsed();
        ha.cluster(&["wait-ready", "120"])?;
        Ok(EtcdMemberKill {
            member,
            healthy_left,
            pg_victim,
            pg_leader,
            to_first_write_ms: millis(to_first_write),
            member_back_ms: millis(member_back),
        })
    }

    /// A database given by URL, restarted (if at all) by `restart` (`sh -c`).
    pub fn external(url: String, restart: Option<String>) -> Self {
        Self {
            url,
            kind: Kind::External { restart },
        }
    }

    /// The SQLite file at `path` (`--store sqlite`): no server, no restart,
    /// no log to read.
    pub fn sqlite(path: &Path) -> Self {
        Self {
            url: format!("sqlite://{}", path.display()),
            kind: Kind::Sqlite,
        }
    }

    /// Whether the run's store is SQLite.
    pub fn is_sqlite(&self) -> bool {
        matches!(self.kind, Kind::Sqlite)
    }

    /// Whether this run can restart PostgreSQL.
    pub fn can_restart(&self) -> bool {
        match &self.kind {
            Kind::Private(_) => true,
            Kind::Ha(_) | Kind::Sqlite => false,
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
            Kind::Ha(_) | Kind::External { restart: None } | Kind::Sqlite => {
                return Err(ChaosError::Setup(
                    "no restart for this database (an external one needs --pg-restart-command; --pg-ha fails over instead)".into(),
                ));
            }
        }
        Ok(started.elapsed())
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        match &self.kind {
            Kind::Private(private) => {
                let _ = private.pg_ctl(&["-m", "immediate", "-w", "stop"]);
            }
            Kind::Ha(ha) => {
                let _ = ha.cluster(&["stop"]);
            }
            Kind::External { .. } | Kind::Sqlite => {}
        }
    }
}

/// What the report and the nemesis's event line say of a freeze: the node,
/// how long, the promotion, and what the old leader did on resume.
impl std::fmt::Display for LeaderFreeze {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} frozen (Patroni and postgres SIGSTOPped) for {:.1} s, ttl {} s; {} promoted {:.1} s after the freeze, first write through HAProxy {:.1} s after; on SIGCONT {}: {}",
            self.victim,
            self.frozen_ms as f64 / 1000.0,
            self.ttl_s,
            self.promoted,
            self.freeze_to_promotion_ms as f64 / 1000.0,
            self.freeze_to_first_write_ms as f64 / 1000.0,
            self.victim,
            self.on_resume
        )
    }
}

/// What the report and the nemesis's event line say of an etcd member kill.
impl std::fmt::Display for EtcdMemberKill {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} killed ({} of 3 healthy left); PostgreSQL leader {} killed meanwhile, {} elected, first write {:.1} s after; {} back and healthy {:.1} s after its restart",
            self.member,
            self.healthy_left,
            self.pg_victim,
            self.pg_leader,
            self.to_first_write_ms as f64 / 1000.0,
            self.member,
            self.member_back_ms as f64 / 1000.0
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ttl_comes_from_the_patroni_template() {
        assert_eq!(leader_ttl(), 20);
        assert_eq!(ttl_of("a: 1\n    ttl: 7\n"), Some(7));
        assert_eq!(ttl_of("a: 1\n"), None);
    }
}
