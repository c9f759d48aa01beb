//! Where the relay may send a shop's events: no server-side request forgery
//! through a webhook URL.
//!
//! Shops register their own URLs, so a URL is untrusted input that the
//! service will act on from inside its own network. [`Egress`] judges a URL
//! twice:
//!
//! * **at registration** ([`Egress::check_url`]): the scheme (`https`, or
//!   `http` when the operator allows it), a host, and every address the host
//!   resolves to must be public ([`ranges::special_purpose`]);
//! * **at every connection**: the relay's HTTP client resolves names through
//!   [`GuardedResolver`], which checks each address and hands the client
//!   only checked ones, so the client connects to exactly the addresses that
//!   were judged (no second lookup an attacker's DNS could answer
//!   differently); a URL whose host is an IP literal (which the client does
//!   not resolve) is checked by the relay itself
//!   ([`Egress::check_literal`]). The relay follows no redirects and uses no
//!   proxy from the environment.
//!
//! An operator whose receivers live on an internal network allows those
//! networks explicitly ([`EgressPolicy::allow_networks`],
//! `--webhook-allow-networks`).

mod ranges;
mod resolver;

use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use futures::future::BoxFuture;
use ipnet::IpNet;
use reqwest::Url;
use url::Host;

pub use ranges::special_purpose;
pub use resolver::GuardedResolver;

/// What the operator allows beyond the public internet over `https`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EgressPolicy {
    allow_http: bool,
    allowed_networks: Vec<IpNet>,
}

impl EgressPolicy {
    /// `https` only, public addresses only: the default.
    pub fn strict() -> Self {
        Self::default()
    }

    /// `http` allowed, and loopback (`127.0.0.0/8`, `::1`) besides the
    /// public internet: a receiver on the same machine, as in tests and
    /// the local demo.
    pub fn loopback() -> Self {
        Self::strict().allow_http(true).allow_networks([
            IpNet::V4(ipnet::Ipv4Net::new_assert(std::net::Ipv4Addr::LOCALHOST, 8)),
            IpNet::V6(ipnet::Ipv6Net::new_assert(
                std::net::Ipv6Addr::LOCALHOST,
                128,
            )),
        ])
    }

    /// Allows `http://` URLs too (tests, a receiver behind the operator's
    /// own TLS terminator).
    pub fn allow_http(mut self, allow: bool) -> Self {
        self.allow_http = allow;
        self
    }

    /// Allows addresses in these networks even when they are not public
    /// (loopback for tests, an internal receiver).
    pub fn allow_networks(mut self, networks: impl IntoIterator<Item = IpNet>) -> Self {
        self.allowed_networks.extend(networks);
        self
    }

    /// Judges one address: allowed when it is public or in an allowed
    /// network. An IPv6 address that embeds an IPv4 one is judged as that
    /// address.
    pub fn check_address(&self, ip: IpAddr) -> Result<(), AddressRefused> {
        // An allowed IPv4 network allows the IPv6 forms that lead to it
        // (mapped, NAT64, 6to4) too: they are judged as that address.
        let inner = match ip {
            IpAddr::V6(v6) => ranges::embedded_v4(v6).map(IpAddr::V4),
            IpAddr::V4(_) => None,
        };
        let allowed = self
            .allowed_networks
            .iter()
            .any(|net| net.contains(&ip) || inner.is_some_and(|inner| net.contains(&inner)));
        match special_purpose(ip) {
            Some(range) if !allowed => Err(AddressRefused { range }),
            _ => Ok(()),
        }
    }
}

/// An address that is not public and not allowed. Its message names
/// neither the address nor its range: it is shown to the shop. The range
/// (`loopback`, `private (RFC 1918)`) is for the operator's log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the destination is not a public address")]
pub struct AddressRefused {
    /// The special-purpose range the address is in.
    pub range: &'static str,
}

/// Why a webhook URL is refused at registration. Messages never carry the
/// addresses a host resolved to (a shop must not learn the service's
/// internal addresses through them).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlRefusal {
    /// Not an absolute URL.
    #[error("not a valid absolute URL")]
    Malformed,
    /// A scheme other than `https` (or `http` where allowed).
    #[error("the URL must use https")]
    Scheme,
    /// No host, or a host that names nothing.
    #[error("the URL has no host")]
    NoHost,
    /// The host does not resolve to any address, or resolves to one that is
    /// not public: one answer for both, so that a shop cannot map the
    /// service's internal names.
    #[error("the URL's host does not resolve to a public address")]
    NotPublic,
}

/// A name lookup: the system's resolver in service, a scripted one in tests
/// (a name that changes its answer between registration and delivery).
pub trait Lookup: Send + Sync + 'static {
    /// The addresses `host` resolves to now.
    fn lookup<'a>(&'a self, host: &'a str) -> BoxFuture<'a, std::io::Result<Vec<IpAddr>>>;
}

/// The system's resolver (`getaddrinfo`, through tokio).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemLookup;

impl Lookup for SystemLookup {
    fn lookup<'a>(&'a self, host: &'a str) -> BoxFuture<'a, std::io::Result<Vec<IpAddr>>> {
        Box::pin(async move {
            let addrs = tokio::net::lookup_host((host, 0)).await?;
            Ok(addrs.map(|a| a.ip()).collect())
        })
    }
}

/// Registration's check of a shop's URL ([`Egress::check_url`]).
#[async_trait::async_trait]
impl chargeonce_core::endpoint::UrlCheck for Egress {
    async fn check(&self, url: &str) -> Result<(), String> {
        self.check_url(url)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}

/// The judge of webhook destinations: a policy and a resolver.
#[derive(Clone)]
pub struct Egress {
    policy: EgressPolicy,
    lookup: Arc<dyn Lookup>,
}

impl fmt::Debug for Egress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Egress")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl Egress {
    /// A judge that resolves names with the system's resolver.
    pub fn new(policy: EgressPolicy) -> Self {
        Self::with_lookup(policy, Arc::new(SystemLookup))
    }

    /// A judge that resolves names with `lookup`.
    pub fn with_lookup(policy: EgressPolicy, lookup: Arc<dyn Lookup>) -> Self {
        Self { policy, lookup }
    }

    /// Judges a URL a shop registers: its scheme, its host, and every
    /// address the host resolves to now. The parsed URL when it passes.
    pub async fn check_url(&self, url: &str) -> Result<Url, UrlRefusal> {
        if url.chars().any(char::is_whitespace) {
            return Err(UrlRefusal::Malformed);
        }
        let parsed = Url::parse(url).map_err(|_| UrlRefusal::Malformed)?;
        self.check_scheme(&parsed)?;
        match parsed.host() {
            None => Err(UrlRefusal::NoHost),
            Some(Host::Ipv4(ip)) => self.judge_all(&[IpAddr::V4(ip)]),
            Some(Host::Ipv6(ip)) => self.judge_all(&[IpAddr::V6(ip)]),
            Some(Host::Domain(name)) => {
                let found = self.lookup.lookup(name).await.unwrap_or_default();
                self.judge_all(&found)
            }
        }
        .map(|()| parsed)
    }

    /// Judges the scheme of a URL about to be delivered to: `https`, or
    /// `http` where allowed. A URL stored before the policy (or with
    /// `--webhook-allow-http` since turned off) is not sent in clear.
    pub fn check_scheme(&self, url: &Url) -> Result<(), UrlRefusal> {
        match url.scheme() {
            "https" => Ok(()),
            "http" if self.policy.allow_http => Ok(()),
            _ => Err(UrlRefusal::Scheme),
        }
    }

    /// Judges the host of a URL about to be delivered to when it is an IP
    /// literal (the HTTP client does not resolve those, so the resolver
    /// never sees them). `Ok` for a name: the resolver judges it.
    pub fn check_literal(&self, url: &Url) -> Result<(), AddressRefused> {
        match url.host() {
            Some(Host::Ipv4(ip)) => self.policy.check_address(IpAddr::V4(ip)),
            Some(Host::Ipv6(ip)) => self.policy.check_address(IpAddr::V6(ip)),
            _ => Ok(()),
        }
    }

    /// The resolver the relay's HTTP client uses: it checks every address
    /// at every connection.
    pub fn resolver(&self) -> Arc<GuardedResolver> {
        Arc::new(GuardedResolver::new(self.clone()))
    }

    /// Every address must pass, and there must be one: a name with one
    /// public and one internal address is refused (the client could pick
    /// either).
    fn judge_all(&self, addresses: &[IpAddr]) -> Result<(), UrlRefusal> {
        if addresses.is_empty()
            || addresses
                .iter()
                .any(|ip| self.policy.check_address(*ip).is_err())
        {
            return Err(UrlRefusal::NotPublic);
        }
        Ok(())
    }

    /// The addresses `host` resolves to, every one of them checked.
    async fn resolve_checked(&self, host: &str) -> Result<Vec<IpAddr>, ResolveError> {
        let found = self
            .lookup
            .lookup(host)
            .await
            .map_err(ResolveError::Lookup)?;
        if found.is_empty() {
            return Err(ResolveError::NoAddress);
        }
        for ip in &found {
            self.policy
                .check_address(*ip)
                .map_err(ResolveError::Refused)?;
        }
        Ok(found)
    }
}

/// Why the relay's resolver gave its HTTP client no address.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// The lookup failed.
    #[error("name lookup failed")]
    Lookup(#[source] std::io::Error),
    /// The name has no address.
    #[error("the name has no address")]
    NoAddress,
    /// An address is not public and not allowed.
    #[error(transparent)]
    Refused(AddressRefused),
}

/// The first [`AddressRefused`] in an error's chain of sources: how the
/// relay tells a refused destination from a failed connection.
pub fn refused_in(error: &(dyn std::error::Error + 'static)) -> Option<AddressRefused> {
    let mut current = Some(error);
    while let Some(e) = current {
        if let Some(refused) = e.downcast_ref::<AddressRefused>() {
            return Some(*refused);
        }
        if let Some(ResolveError::Refused(refused)) = e.downcast_ref::<ResolveError>() {
            return Some(*refused);
        }
        current = e.source();
    }
    None
}
