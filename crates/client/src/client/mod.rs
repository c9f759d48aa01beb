//! The client: its type, its builder, the headers it speaks.
//!
//! The keyed POSTs (pay, refund, pay an order) and their retry loop live in
//! `keyed`, the reads in `reads` (lists and key introspection in `lists`), a raw answer and the transport in
//! `answer`, what an answer of a keyed POST means in `judge`, the shop's
//! API keys (`/v1/api-keys`) in `api_keys`, and its webhook endpoints
//! (`/v1/webhook-endpoints`) in `webhook_endpoints`.

mod answer;
mod api_keys;
mod judge;
mod keyed;
mod lists;
mod reads;
mod webhook_endpoints;

use std::fmt;
use std::time::Duration;

use reqwest::Url;

use crate::Error;
use crate::retry::RetryPolicy;

/// The request header that carries the key.
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";
/// The answer header that marks a replay of the key's first answer.
pub const IDEMPOTENT_REPLAYED: &str = "idempotent-replayed";
/// The RFC 7240 request header the client asks the server to wait with.
pub const PREFER: &str = "prefer";
/// The RFC 7240 answer header that says the server honoured the preference.
pub const PREFERENCE_APPLIED: &str = "preference-applied";

/// A client of one chargeonce service, as one shop. Cheap to clone (the
/// connection pool is shared). `Debug` does not show the secret key.
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    base: Url,
    shop: String,
    secret: String,
    policy: RetryPolicy,
}

/// Builds a [`Client`].
#[derive(Clone)]
pub struct ClientBuilder {
    base: String,
    shop: String,
    secret: String,
    policy: RetryPolicy,
    connect_timeout: Duration,
    reuse_connections: bool,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("base", &self.base.as_str())
            .field("shop", &self.shop)
            .field("secret", &"***")
            .field("policy", &self.policy)
            .finish()
    }
}

impl fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("base", &self.base)
            .field("shop", &self.shop)
            .field("secret", &"***")
            .field("policy", &self.policy)
            .field("connect_timeout", &self.connect_timeout)
            .field("reuse_connections", &self.reuse_connections)
            .finish()
    }
}

impl ClientBuilder {
    /// Sets the retry policy (see [`RetryPolicy`]).
    pub fn retry_policy(mut self, policy: RetryPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// The longest a TCP connect may take (5 s by default). A failed connect
    /// sent nothing, so it is always safe to retry.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Whether idle connections are kept for later requests (yes by default).
    /// `false` opens a new connection per request: slower, but every attempt
    /// meets the network afresh (load balancers that pin connections, fault
    /// proxies that decide per connection).
    pub fn reuse_connections(mut self, reuse: bool) -> Self {
        self.reuse_connections = reuse;
        self
    }

    /// Builds the client.
    pub fn build(self) -> Result<Client, Error> {
        let mut base = Url::parse(&self.base)
            .map_err(|e| Error::Config(format!("base URL `{}`: {e}", self.base)))?;
        if base.cannot_be_a_base() || !matches!(base.scheme(), "http" | "https") {
            return Err(Error::Config(format!(
                "base URL `{}` is not an http(s) URL",
                self.base
            )));
        }
        // Without a TLS stack every https attempt would fail to connect and be
        // retried for the whole budget: refuse it now, plainly.
        if base.scheme() == "https" && !cfg!(feature = "rustls") {
            return Err(Error::Config(format!(
                "base URL `{}` needs TLS: build chargeonce-client with the `rustls` feature",
                self.base
            )));
        }
        if !base.path().ends_with('/') {
            let path = format!("{}/", base.path());
            base.set_path(&path);
        }
        let mut http = reqwest::Client::builder();
        if !self.reuse_connections {
            http = http.pool_max_idle_per_host(0);
        }
        let http = http
            .connect_timeout(self.connect_timeout)
            // A redirected POST would turn into a GET, or go elsewhere: never follow.
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("chargeonce-client/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| Error::Config(e.to_string()))?;
        Ok(Client {
            http,
            base,
            shop: self.shop,
            secret: self.secret,
            policy: self.policy,
        })
    }
}

impl Client {
    /// A builder for a client of the service at `base_url`
    /// (`http://127.0.0.1:8080`), as `shop` with its secret key.
    pub fn builder(
        base_url: impl Into<String>,
        shop: impl Into<String>,
        secret: impl Into<String>,
    ) -> ClientBuilder {
        ClientBuilder {
            base: base_url.into(),
            shop: shop.into(),
            secret: secret.into(),
            policy: RetryPolicy::default(),
            connect_timeout: Duration::from_secs(5),
            reuse_connections: true,
        }
    }

    /// A client with the default [`RetryPolicy`].
    pub fn new(
        base_url: impl Into<String>,
        shop: impl Into<String>,
        secret: impl Into<String>,
    ) -> Result<Self, Error> {
        Self::builder(base_url, shop, secret).build()
    }

    /// The retry policy.
    pub fn policy(&self) -> &RetryPolicy {
        &self.policy
    }

    /// The same client (and connection pool) with another retry policy.
    pub fn with_policy(&self, policy: RetryPolicy) -> Self {
        Self {
            policy,
            ..self.clone()
        }
    }

    fn url(&self, path: &str) -> Url {
        // `path` is relative and ASCII; joining cannot fail on an http(s) base.
        self.base.join(path).unwrap_or_else(|_| self.base.clone())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn debug_hides_the_secret() {
        let builder = Client::builder("http://127.0.0.1:1", "shop", "sk_very_secret");
        assert!(!format!("{builder:?}").contains("very_secret"));
        let client = builder.build().unwrap();
        assert!(!format!("{client:?}").contains("very_secret"));
    }

    #[test]
    fn base_urls_are_checked_and_joined() {
        assert!(matches!(
            Client::new("not a url", "s", "k"),
            Err(Error::Config(_))
        ));
        assert!(matches!(
            Client::new("ftp://example.com", "s", "k"),
            Err(Error::Config(_))
        ));
        let client = Client::new("http://127.0.0.1:8080/api", "s", "k").unwrap();
        assert_eq!(
            client.url("v1/payments").as_str(),
            "http://127.0.0.1:8080/api/v1/payments"
        );
    }
}
