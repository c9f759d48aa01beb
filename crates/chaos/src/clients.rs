//! The clients of a run: one SDK client per shop and instance proxy.

use std::time::Duration;

use chargeonce_client::{Client, RetryPolicy};

use crate::args::ChaosArgs;
use crate::error::ChaosError;

/// The clients of a run: one SDK client per shop and instance proxy.
#[derive(Debug)]
pub struct Clients {
    /// `by_shop[shop][instance]`.
    by_shop: Vec<Vec<Client>>,
}

impl Clients {
    /// Clients of `shops` (id, secret) through every proxy base URL.
    pub fn new(
        shops: &[(String, String)],
        proxies: &[String],
        args: &ChaosArgs,
    ) -> Result<Self, ChaosError> {
        let policy = RetryPolicy::default()
            .budget(args.call_budget)
            .attempt_timeout(args.attempt_timeout)
            .backoff(Duration::from_millis(50), Duration::from_secs(1))
            .max_attempts(50)
            .prefer_wait(Some(
                args.attempt_timeout.saturating_sub(Duration::from_secs(1)),
            ));
        let by_shop = shops
            .iter()
            .map(|(shop, secret)| {
                proxies
                    .iter()
                    .map(|base| {
                        Client::builder(base.clone(), shop.clone(), secret.clone())
                            .retry_policy(policy)
                            .reuse_connections(false)
                            .connect_timeout(Duration::from_secs(1))
                            .build()
                            .map_err(|e| ChaosError::Setup(format!("client: {e}")))
                    })
                    .collect::<Result<Vec<_>, _>>()
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { by_shop })
    }

    pub(crate) fn get(&self, shop: usize, instance: usize) -> &Client {
        let row = &self.by_shop[shop % self.by_shop.len()];
        &row[instance % row.len()]
    }

    pub(crate) fn instances(&self) -> usize {
        self.by_shop.first().map_or(1, Vec::len).max(1)
    }
}
