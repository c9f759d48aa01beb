//! The flags of `chargeonce chaos`: the size of the run, the faults, and the
//! seed every random choice comes from.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

/// A component deliberately broken, to show that the checker notices: a run
/// with a sabotage must report violations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Sabotage {
    /// Nothing broken: the run must be clean.
    None,
    /// The acquirer skips its key check (`chargeonce acquirer
    /// --no-idempotency`) while the service believes it idempotent: every
    /// retry after a lost acquirer answer charges again. (The run then sends
    /// no acquirer webhooks: they would settle the lost answer first.)
    AcquirerSkipsKeyCheck,
    /// With `--pg-ha`: synchronous replication off, and before each failover
    /// the leader's WAL is held back from the replicas for 2 s, so payments
    /// acknowledged in that time exist on the killed leader alone and are
    /// lost with it.
    AsyncReplication,
}

/// The store the instances keep their books in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StoreKind {
    /// PostgreSQL: a private cluster, `--database-url`, or `--pg-ha`.
    Postgres,
    /// An SQLite file in the run's folder. The SQLite store is one process by
    /// design, so the run has one instance (`--instances 1`): its kills are
    /// crashes of the only process (the file must hold everything it
    /// acknowledged, and the restarted process must resume what it left),
    /// its freezes stall everything, and there is no database restart.
    Sqlite,
}

/// Flags of `chargeonce chaos`.
#[derive(Debug, Clone, Args)]
pub struct ChaosArgs {
    /// Seed of every random choice (intents, faults, the nemesis schedule).
    /// Random by default; always printed, so a run can be repeated.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Payment intents (orders) to work through.
    #[arg(long, default_value_t = 2000)]
    pub intents: usize,
    /// Concurrent clients.
    #[arg(long, default_value_t = 32)]
    pub clients: usize,
    /// Service instances, all on one PostgreSQL database.
    #[arg(long, default_value_t = 3)]
    pub instances: usize,
    /// Shops the intents are spread over (their keys and order references
    /// collide on purpose: nothing may cross shops).
    #[arg(long, default_value_t = 2)]
    pub shops: usize,

    /// Instance kills (SIGKILL, then a restart on the same port).
    #[arg(long, default_value_t = 3)]
    pub kills: usize,
    /// Freezes (SIGSTOP past the lease, then SIGCONT): zombies that must not write.
    #[arg(long, default_value_t = 1)]
    pub freezes: usize,
    /// Kills between the acquirer's commit and ours: the instance dies the
    /// moment the acquirer's answer to its charge reaches it.
    #[arg(long, default_value_t = 1)]
    pub commit_window_kills: usize,
    /// PostgreSQL restarts with `-m immediate`.
    #[arg(long, default_value_t = 1)]
    pub pg_restarts: usize,

    /// Run PostgreSQL highly available: deploy/ha/cluster (etcd, three nodes
    /// under Patroni with synchronous replication, HAProxy to the leader),
    /// whose leader the nemesis kills `--pg-failovers` times. Needs
    /// deploy/ha/install's Patroni and the Debian packages etcd-server and
    /// haproxy.
    #[arg(long, conflicts_with = "database_url")]
    pub pg_ha: bool,
    /// With `--pg-ha`: leader failovers (SIGKILL of the leader's postgres;
    /// Patroni promotes the synchronous standby, the old leader rejoins as a
    /// replica).
    #[arg(long, default_value_t = 1)]
    pub pg_failovers: usize,
    /// With `--pg-ha`: kill the leader's Patroni too, so the election waits
    /// for its leader key to expire (the loss of a whole node).
    #[arg(long)]
    pub pg_failover_with_patroni: bool,
    /// With `--pg-ha`: leader freezes. The leader's Patroni and PostgreSQL
    /// are SIGSTOPped (a silent host) past the leader key's `ttl` (20 s,
    /// deploy/ha/patroni.yml.in) until another node leads and takes writes
    /// through HAProxy, then SIGCONTed; the old leader must demote and
    /// rejoin as a replica, never take the key back.
    #[arg(long, default_value_t = 0)]
    pub pg_leader_freezes: usize,
    /// With `--pg-ha`: etcd member kills. One of the three etcd members
    /// (etcd's leader) is SIGKILLed, the PostgreSQL leader is killed while
    /// two members are left (the election must work on the quorum), and
    /// the member is started again.
    #[arg(long, default_value_t = 0)]
    pub etcd_member_kills: usize,
    /// With `--pg-ha`: the cluster's first port (HAProxy; the nodes and etcd
    /// use the next 80).
    #[arg(long, default_value_t = 15600)]
    pub pg_ha_base_port: u16,

    /// Share of client connections delayed by the proxy.
    #[arg(long, default_value_t = 0.05)]
    pub delay_rate: f64,
    /// The longest proxy delay.
    #[arg(long, default_value = "300ms", value_parser = humantime::parse_duration)]
    pub max_delay: Duration,
    /// Share of client connections reset by the proxy before forwarding.
    #[arg(long, default_value_t = 0.02)]
    pub reset_rate: f64,
    /// Share of answers dropped by the proxy after the request was forwarded
    /// (the client never learns what happened).
    #[arg(long, default_value_t = 0.05)]
    pub drop_rate: f64,
    /// Share of acquirer charges whose answer is lost after the charge.
    #[arg(long, default_value_t = 0.03)]
    pub acquirer_lost_rate: f64,
    /// Share of acquirer requests answered 5xx before anything is recorded.
    #[arg(long, default_value_t = 0.02)]
    pub acquirer_error_rate: f64,
    /// Longest ordinary acquirer latency.
    #[arg(long, default_value = "20ms", value_parser = humantime::parse_duration)]
    pub acquirer_latency: Duration,

    /// Share of intents sent twice at once (a double click).
    #[arg(long, default_value_t = 0.1)]
    pub double_click_rate: f64,
    /// No acquirer webhooks (by default the acquirer sends signed
    /// `payment.*` webhooks to instance 0, some twice, some out of order).
    #[arg(long)]
    pub no_webhooks: bool,
    /// Share of acquirer webhooks delivered twice.
    #[arg(long, default_value_t = 0.1)]
    pub webhook_duplicate_rate: f64,
    /// Share of acquirer `payment.processing` webhooks held back so the
    /// outcome overtakes them.
    #[arg(long, default_value_t = 0.1)]
    pub webhook_reorder_rate: f64,
    /// Share of acquirer webhook deliveries hung up on within 5 ms (then
    /// retried): instance 0's handler is cut wherever it was, a store
    /// transaction's `BEGIN` among the places.
    #[arg(long, default_value_t = 0.1)]
    pub webhook_hangup_rate: f64,

    /// Share of intents repeated much later (after every intent was sent once).
    #[arg(long, default_value_t = 0.05)]
    pub late_retry_rate: f64,
    /// Share of intents repeated under the same key with another amount (must be 422).
    #[arg(long, default_value_t = 0.03)]
    pub changed_body_rate: f64,
    /// Share of paid intents refunded (a partial refund, sometimes two at once).
    #[arg(long, default_value_t = 0.1)]
    pub refund_rate: f64,
    /// Share of intents whose payment is canceled while it runs (a cancel
    /// sent under its own key a moment after the payment): the customer
    /// must end up holding no charge for a canceled payment, and a cancel
    /// of a payment already final must be refused.
    #[arg(long, default_value_t = 0.03)]
    pub cancel_rate: f64,
    /// Share of intents that only authorize (`capture_method` `manual`) and
    /// then capture in one or several parts (sometimes at once, through
    /// several instances), void (sometimes racing a capture), or let the
    /// authorization expire; refunds then give back captured money only.
    #[arg(long, default_value_t = 0.15)]
    pub authorize_rate: f64,
    /// The instances' `--authorization-ttl`: short, so authorizations left
    /// alone expire within the run (and captures race the expiry).
    #[arg(long, default_value = "8s", value_parser = humantime::parse_duration)]
    pub authorization_ttl: Duration,
    /// Share of intents paid with a card that is declined.
    #[arg(long, default_value_t = 0.1)]
    pub decline_rate: f64,

    /// The service's lease on a running key (short, so zombies and
    /// take-overs happen within the run).
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    pub lease: Duration,
    /// One client attempt's timeout.
    #[arg(long, default_value = "3s", value_parser = humantime::parse_duration)]
    pub attempt_timeout: Duration,
    /// One client call's budget (then the call is uncertain and the client
    /// comes back later with the same key, up to three calls).
    #[arg(long, default_value = "15s", value_parser = humantime::parse_duration)]
    pub call_budget: Duration,
    /// How long the service's workers get to settle everything once the
    /// faults stop.
    #[arg(long, default_value = "120s", value_parser = humantime::parse_duration)]
    pub settle_timeout: Duration,

    /// The store: `postgres` (default) or `sqlite` (one instance, see
    /// [`StoreKind::Sqlite`]).
    #[arg(long, value_enum, default_value_t = StoreKind::Postgres)]
    pub store: StoreKind,
    /// PostgreSQL to use: by default a private cluster started for the run
    /// (so its restart disturbs nobody else). With a URL, that database,
    /// restarted by `--pg-restart-command`.
    #[arg(long)]
    pub database_url: Option<String>,
    /// The command that restarts the PostgreSQL of `--database-url`
    /// (run with `sh -c`). Without it, no restart happens on an external database.
    #[arg(long)]
    pub pg_restart_command: Option<String>,
    /// The `chargeonce` binary to run as acquirer and instances (default: this one).
    #[arg(long)]
    pub bin: Option<PathBuf>,
    /// Where logs and the acquirer's ledger go (default: a temporary directory,
    /// kept when the run fails).
    #[arg(long)]
    pub work_dir: Option<PathBuf>,
    /// Also write the report as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// No progress bar.
    #[arg(long)]
    pub no_progress: bool,
    /// Break a component on purpose (the checker must then report violations).
    #[arg(long, value_enum, default_value_t = Sabotage::None)]
    pub sabotage: Sabotage,
    /// The acquirer ignores idempotency keys (`chargeonce acquirer
    /// --no-idempotency`) and the service knows it (`serve
    /// --acquirer-no-idempotency`): every lost answer, kill and take-over is
    /// resolved by the settle window and a look-up by reference. The run must
    /// stay clean.
    #[arg(long)]
    pub acquirer_without_keys: bool,
    /// The instances' `--acquirer-settle-window`: how long after an unknown
    /// outcome at an acquirer without keys, or a refused resend at any
    /// acquirer, nobody looks the attempt up.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    pub settle_window: Duration,
    /// Share of the acquirer's charges (and refunds) recorded 3 s late,
    /// whoever still waits (`chargeonce acquirer --late-rate`): longer than
    /// the instances' acquirer timeout, so their retries meet the first
    /// attempt in flight.
    #[arg(long, default_value_t = 0.02)]
    pub acquirer_late_rate: f64,
    /// How the acquirer answers a duplicate of a request in flight
    /// (`wait`, `409`, `422`, `400`, `208`; see `chargeonce acquirer
    /// --in-flight-duplicate`). Several, comma-separated, take turns for 5 s
    /// each through the run, starting with the first.
    #[arg(long, value_delimiter = ',', default_value = "wait")]
    pub in_flight_duplicate: Vec<chargeonce_acquirer::InFlightDuplicate>,
}

impl ChaosArgs {
    /// The flags of a small run, for tests: `intents` intents on `clients`
    /// clients, the default faults, and no progress bar.
    pub fn small(intents: usize, clients: usize) -> Self {
        use clap::Parser;
        #[derive(Parser)]
        struct Wrapper {
            #[command(flatten)]
            args: ChaosArgs,
        }
        let mut args = Wrapper::parse_from(["chaos"]).args;
        args.intents = intents;
        args.clients = clients;
        args.no_progress = true;
        args
    }
}
