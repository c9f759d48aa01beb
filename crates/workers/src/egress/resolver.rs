//! The relay's HTTP client resolves names here, so that it connects only to
//! addresses that were checked a moment before, by the same lookup.

use std::net::SocketAddr;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use super::Egress;

/// A [`reqwest::dns::Resolve`] that refuses a name any of whose addresses is
/// not allowed, and otherwise hands the client those very addresses.
#[derive(Debug, Clone)]
pub struct GuardedResolver {
    egress: Egress,
}

impl GuardedResolver {
    /// A resolver judging with `egress`.
    pub fn new(egress: Egress) -> Self {
        Self { egress }
    }
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let egress = self.egress.clone();
        Box::pin(async move {
            let found = egress.resolve_checked(name.as_str()).await?;
            // Port 0: the client puts the URL's port (or the scheme's) in.
            let addrs: Addrs = Box::new(found.into_iter().map(|ip| SocketAddr::new(ip, 0)));
            Ok(addrs)
        })
    }
}
