//! Where merchant events may be delivered: the relay's policy (`serve`) and
//! the check of a URL at registration (`shops set-webhook`). Both read the
//! same flags (or environment variables), so a URL that registers is one the
//! relay delivers to.

use chargeonce_workers::egress::{Egress, EgressPolicy};

/// The webhook destination flags.
#[derive(Debug, Clone, clap::Args)]
pub struct EgressArgs {
    /// Networks (CIDR, comma-separated) that webhook URLs may lead to even
    /// though they are not public, such as `127.0.0.0/8,::1/128` for tests
    /// or an internal receiver's subnet. By default none: loopback, private
    /// (RFC 1918), link-local (cloud metadata), unique-local, CGNAT and the
    /// other special-purpose ranges are refused, at registration and at
    /// every connection.
    #[arg(
        long,
        env = "CHARGEONCE_WEBHOOK_ALLOW_NETWORKS",
        value_delimiter = ',',
        value_name = "CIDR"
    )]
    pub webhook_allow_networks: Vec<ipnet::IpNet>,
    /// Allow `http://` webhook URLs (by default `https://` only).
    #[arg(long, env = "CHARGEONCE_WEBHOOK_ALLOW_HTTP")]
    pub webhook_allow_http: bool,
}

impl EgressArgs {
    /// The judge of webhook destinations these flags describe.
    pub fn egress(&self) -> Egress {
        Egress::new(
            EgressPolicy::strict()
                .allow_http(self.webhook_allow_http)
                .allow_networks(self.webhook_allow_networks.iter().copied()),
        )
    }
}
