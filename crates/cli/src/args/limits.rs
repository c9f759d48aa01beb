//! The HTTP layer's limits (`chargeonce serve`): how long a client may take
//! over a request, how many connections and waiting requests an instance
//! takes, and how fast each shop may send.

use std::time::Duration;

use chargeonce_server::auth_limits::AuthLimitSettings;
use chargeonce_server::conn::ConnectionLimits;
use chargeonce_server::limits::{RateLimit, RequestLimits, WaiterCaps};
use clap::Args;

/// Timeouts, connection caps, rate limits and waiter caps.
#[derive(Debug, Clone, Args)]
pub struct LimitsArgs {
    /// The longest a client may take to send a request head, counted from
    /// the connection's start or the head's first byte; then the connection
    /// is closed. `0s`: no limit.
    #[arg(long, env = "CHARGEONCE_HEADER_TIMEOUT", default_value = "10s", value_parser = humantime::parse_duration)]
    pub header_timeout: Duration,
    /// A kept-alive connection with no request for this long is closed.
    /// `0s`: no limit.
    #[arg(long, env = "CHARGEONCE_IDLE_TIMEOUT", default_value = "60s", value_parser = humantime::parse_duration)]
    pub idle_timeout: Duration,
    /// The longest a request body may take to arrive after its head; then
    /// 408 `body_timeout` and the connection is closed. `0s`: no limit.
    #[arg(long, env = "CHARGEONCE_BODY_TIMEOUT", default_value = "10s", value_parser = humantime::parse_duration)]
    pub body_timeout: Duration,
    /// The longest a request may take (plus N s for `Prefer: wait=N`); then
    /// 503 `request_timeout` with Retry-After. A payment it started goes on
    /// and is answered to the retry. Keep it above --acquirer-timeout. `0s`:
    /// no limit.
    #[arg(long, env = "CHARGEONCE_REQUEST_TIMEOUT", default_value = "30s", value_parser = humantime::parse_duration)]
    pub request_timeout: Duration,
    /// Most client connections open at once; lowered to what the file limit
    /// (`ulimit -n`) allows with room for the database and the acquirer. At
    /// the cap, new connections wait in the listen backlog.
    #[arg(long, env = "CHARGEONCE_MAX_CLIENT_CONNECTIONS", default_value_t = chargeonce_server::conn::MAX_CONNECTIONS)]
    pub max_client_connections: usize,
    /// Most connections open at once from one client address (an IPv4
    /// address or an IPv6 /64). A new connection over it closes that
    /// client's least recently active idle connection (or, when all of them
    /// serve requests, is closed itself).
    #[arg(long, env = "CHARGEONCE_MAX_CONNECTIONS_PER_CLIENT", default_value_t = chargeonce_server::conn::MAX_CONNECTIONS_PER_CLIENT)]
    pub max_connections_per_client: usize,
    /// Failed shop authentications one client address may cause a minute
    /// (at once after a quiet minute); past it, 429 `rate_limited` before
    /// the store is asked about any shop not in this instance's cache.
    /// `0`: no limit.
    #[arg(long, env = "CHARGEONCE_AUTH_FAILURES_PER_CLIENT", default_value_t = chargeonce_server::auth_limits::AUTH_FAILURES_PER_MINUTE)]
    pub auth_failures_per_client: u32,
    /// Store look-ups per second (and at once) of shop ids this instance
    /// has never seen, from all clients; past it, 429 `rate_limited`. `0`:
    /// no limit.
    #[arg(long, env = "CHARGEONCE_UNSEEN_SHOP_LOOKUPS", default_value_t = chargeonce_server::auth_limits::UNSEEN_LOOKUPS_PER_SECOND)]
    pub unseen_shop_lookups: u32,
    /// Proxies in front of this service (comma-separated CIDRs, e.g. the
    /// load balancers' `10.0.0.0/24`): for a request from one of them, the
    /// per-address limits (failed authentications, console logins) count the
    /// client named in `X-Forwarded-For` (the first hop from the right that
    /// is not a trusted proxy). Without it the header is ignored. The
    /// per-client connection share always counts the TCP peer.
    #[arg(long, env = "CHARGEONCE_TRUSTED_PROXIES", value_delimiter = ',')]
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// Requests per second each shop may send, sustained (past it and the
    /// burst: 429 `rate_limited` with Retry-After). `0`: no limit.
    #[arg(long, env = "CHARGEONCE_RATE_LIMIT", default_value_t = chargeonce_server::limits::RATE_LIMIT)]
    pub rate_limit: u32,
    /// Requests a shop may send at once above its rate after a quiet spell.
    #[arg(long, env = "CHARGEONCE_RATE_LIMIT_BURST", default_value_t = chargeonce_server::limits::RATE_LIMIT_BURST)]
    pub rate_limit_burst: u32,
    /// Most `Prefer: wait` requests waiting at once on this instance; past
    /// it a repeat gets the plain 409 at once. `0`: none waits.
    #[arg(long, env = "CHARGEONCE_MAX_WAITERS", default_value_t = chargeonce_server::limits::MAX_WAITERS)]
    pub max_waiters: usize,
    /// Most `Prefer: wait` requests of one shop waiting at once on this
    /// instance. `0`: none waits.
    #[arg(long, env = "CHARGEONCE_MAX_WAITERS_PER_SHOP", default_value_t = chargeonce_server::limits::MAX_WAITERS_PER_SHOP)]
    pub max_waiters_per_shop: usize,
}

impl LimitsArgs {
    /// The request and body timeouts.
    pub fn request_limits(&self) -> RequestLimits {
        RequestLimits {
            request_timeout: self.request_timeout,
            body_timeout: self.body_timeout,
        }
    }

    /// Each shop's rate.
    pub fn rate_limit(&self) -> RateLimit {
        RateLimit {
            per_second: self.rate_limit,
            burst: self.rate_limit_burst,
        }
    }

    /// The `Prefer: wait` caps.
    pub fn waiter_caps(&self) -> WaiterCaps {
        WaiterCaps {
            instance: self.max_waiters,
            shop: self.max_waiters_per_shop,
        }
    }

    /// The connection limits as asked, before the file limit lowers them
    /// (`ConnectionLimits::fit_fd_limit`).
    pub fn connection_limits(&self) -> ConnectionLimits {
        ConnectionLimits {
            header_timeout: self.header_timeout,
            idle_timeout: self.idle_timeout,
            max_connections: self.max_client_connections.max(1),
            max_connections_per_client: self.max_connections_per_client.max(1),
        }
    }

    /// The limits on work before a shop is authenticated.
    pub fn auth_limits(&self) -> AuthLimitSettings {
        AuthLimitSettings {
            failures_per_minute: self.auth_failures_per_client,
            unseen_lookups_per_second: self.unseen_shop_lookups,
        }
    }
}
