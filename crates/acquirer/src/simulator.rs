//! The simulator's behaviour: which answer a charge gets, and when.

use std::path::Path;
use std::time::Duration;

use async_trait::async_trait;
use chargeonce_core::{
    Acquirer, AcquirerError, AcquirerKey, CardToken, ChargeRequest, ChargeResult,
};
use uuid::Uuid;

use crate::entry::now_millis;
use crate::ledger::Ledger;
use crate::{ChargeStatus, LedgerEntry, LedgerReport, SimulatorError};

/// Decline code of `tok_declined`.
pub const CARD_DECLINED: &str = "card_declined";

/// Decline code of `tok_insufficient_funds`.
pub const INSUFFICIENT_FUNDS: &str = "insufficient_funds";

/// What the simulator says when an acquirer key is reused with other
/// parameters (amount, currency, shop, reference or payment id), as a real
/// provider's idempotency error. The attempt is NOT recorded, and the answer is
/// [`AcquirerError::Unknown`], never a decline: the key's first charge may well
/// have moved money, so nothing definite may be concluded from the refusal.
pub const KEY_REUSED: &str = "idempotency_key_reused";

/// The message of the [`AcquirerError::Unknown`] that `tok_timeout` returns on
/// the first execution of a key.
pub const LOST_ANSWER: &str = "timeout: answer lost after commit";

/// The card tokens that choose the simulator's behaviour.
pub mod tokens {
    /// Succeeds.
    pub const OK: &str = "tok_ok";
    /// Declined with `card_declined`.
    pub const DECLINED: &str = "tok_declined";
    /// Declined with `insufficient_funds`.
    pub const INSUFFICIENT_FUNDS: &str = "tok_insufficient_funds";
    /// Charged, but the first answer is lost (the caller sees a timeout).
    pub const TIMEOUT: &str = "tok_timeout";
    /// Charged, then answered after [`SimulatorConfig::slow`](crate::SimulatorConfig::slow).
    pub const SLOW: &str = "tok_slow";
}

/// How the simulator treats a charge, chosen by its card token.
///
/// | token | behaviour |
/// |---|---|
/// | `tok_ok`, and any token not listed | [`Behaviour::Succeed`] |
/// | `tok_declined` | [`Behaviour::Decline`] with `card_declined` |
/// | `tok_insufficient_funds` | [`Behaviour::Decline`] with `insufficient_funds` |
/// | `tok_timeout` | [`Behaviour::LoseAnswer`] |
/// | `tok_slow` | [`Behaviour::Slow`] |
///
/// The special behaviours (lost, slow) apply only to the one execution that
/// wrote the ledger row; every repeat of the key gets the stored answer at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// Charges and answers `Succeeded`.
    Succeed,
    /// Records a declined attempt and answers `Declined` with this code.
    Decline(&'static str),
    /// Charges (the row is committed as succeeded), then loses the answer: the
    /// first execution returns [`AcquirerError::Unknown`] with [`LOST_ANSWER`].
    LoseAnswer,
    /// Charges, then waits [`SimulatorConfig::slow`] before answering `Succeeded`.
    Slow,
}

impl Behaviour {
    /// The behaviour a token selects.
    pub fn of(token: &CardToken) -> Self {
        match token.as_str() {
            tokens::DECLINED => Self::Decline(CARD_DECLINED),
            tokens::INSUFFICIENT_FUNDS => Self::Decline(INSUFFICIENT_FUNDS),
            tokens::TIMEOUT => Self::LoseAnswer,
            tokens::SLOW => Self::Slow,
            _ => Self::Succeed,
        }
    }

    /// What the ledger records for it.
    fn outcome(&self) -> (ChargeStatus, Option<String>) {
        match self {
            Self::Decline(code) => (ChargeStatus::Declined, Some((*code).to_owned())),
            Self::Succeed | Self::LoseAnswer | Self::Slow => (ChargeStatus::Succeeded, None),
        }
    }
}

/// Settings of the simulator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimulatorConfig {
    /// How long `tok_slow` waits, after committing, before answering (3 s by default).
    pub slow: Duration,
}

impl Default for SimulatorConfig {
    fn default() -> Self {
        Self {
            slow: Duration::from_secs(3),
        }
    }
}

/// The acquirer simulator: an idempotent acquirer over its own SQLite ledger.
/// See the [crate documentation](crate) for its guarantees.
#[derive(Debug)]
pub struct Simulator {
    ledger: Ledger,
    config: SimulatorConfig,
}

impl Simulator {
    /// Opens the ledger file at `path`, creating it (and its table) if missing.
    ///
    /// The file is in WAL mode with `synchronous=FULL` (a recorded charge
    /// survives a power cut) and a busy timeout of 10 s. Other processes may
    /// open the same file at the same time and charge concurrently. The ledger
    /// keeps its migration bookkeeping in its own table
    /// (`_chargeonce_acquirer_migrations`), but should still get a file of its own.
    pub async fn open(path: &Path, config: SimulatorConfig) -> Result<Self, SimulatorError> {
        let ledger = Ledger::open(path).await?;
        Ok(Self { ledger, config })
    }

    /// A simulator over a private in-memory ledger, gone when it is dropped. For tests.
    pub async fn in_memory(config: SimulatorConfig) -> Result<Self, SimulatorError> {
        let ledger = Ledger::in_memory().await?;
        Ok(Self { ledger, config })
    }

    /// Its settings.
    pub fn config(&self) -> &SimulatorConfig {
        &self.config
    }

    /// Every charge attempt, ordered by `created_at`, then `id`.
    pub async fn ledger(&self) -> Result<Vec<LedgerEntry>, SimulatorError> {
        self.ledger.all().await
    }

    /// The attempt recorded under an acquirer key, without charging: what the
    /// reconciler asks when it only wants to know.
    pub async fn find(&self, key: &AcquirerKey) -> Result<Option<LedgerEntry>, SimulatorError> {
        self.ledger.find(key.as_str()).await
    }

    /// The ledger and the money that moved per currency (what `GET /ledger` shows).
    pub async fn report(&self) -> Result<LedgerReport, SimulatorError> {
        Ok(LedgerReport::from_entries(self.ledger().await?))
    }

    /// Closes the ledger's connections. Later calls fail; the file stays.
    pub async fn close(&self) {
        self.ledger.close().await;
    }

    /// The stored answer for a key that another execution recorded first.
    async fn replay(&self, request: &ChargeRequest) -> Result<ChargeResult, AcquirerError> {
        let stored = self
            .ledger
            .find(request.acquirer_key.as_str())
            .await
            .map_err(|e| AcquirerError::Unknown(format!("acquirer ledger read failed: {e}")))?
            .ok_or_else(|| {
                // Rows are never deleted, so this means the ledger was tampered with.
                AcquirerError::Unknown("acquirer ledger lost a recorded charge".to_owned())
            })?;
        if let Some(field) = mismatch(&stored, request) {
            tracing::warn!(
                payment_id = %request.payment_id,
                charge_id = %stored.id,
                field,
                "acquirer key reused with different parameters; refused"
            );
            return Err(AcquirerError::Unknown(format!(
                "{KEY_REUSED}: the acquirer key was first used with other parameters"
            )));
        }
        tracing::debug!(
            payment_id = %request.payment_id,
            charge_id = %stored.id,
            "acquirer replayed a recorded charge"
        );
        Ok(stored.result())
    }
}

/// The first parameter in which a repeat differs from the recorded attempt.
fn mismatch(stored: &LedgerEntry, request: &ChargeRequest) -> Option<&'static str> {
    if stored.shop_id != request.shop_id {
        Some("shop_id")
    } else if stored.payment_id != request.payment_id {
        Some("payment_id")
    } else if stored.reference != request.reference {
        Some("reference")
    } else if stored.amount.currency() != request.amount.currency() {
        Some("currency")
    } else if stored.amount != request.amount {
        Some("amount")
    } else {
        None
    }
}

/// A ledger write failed: nothing is known, unless the statement never ran.
fn write_failed(error: sqlx::Error) -> AcquirerError {
    match error {
        // No connection was obtained: the INSERT was never sent.
        sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed => {
            AcquirerError::NotSent(format!("acquirer ledger unavailable: {error}"))
        }
        _ => AcquirerError::Unknown(format!("acquirer ledger write failed: {error}")),
    }
}

#[async_trait]
impl Acquirer for Simulator {
    async fn charge(&self, request: &ChargeRequest) -> Result<ChargeResult, AcquirerError> {
        let behaviour = Behaviour::of(&request.token);
        let (status, decline_code) = behaviour.outcome();
        let entry = LedgerEntry {
            id: format!("ch_{}", Uuid::now_v7().simple()),
            acquirer_key: request.acquirer_key.clone(),
            shop_id: request.shop_id.clone(),
            payment_id: request.payment_id.clone(),
            reference: request.reference.clone(),
            amount: request.amount,
            status,
            decline_code,
            created_at: now_millis(),
        };
        if !self.ledger.insert(&entry).await.map_err(write_failed)? {
            return self.replay(request).await;
        }
        tracing::info!(
            payment_id = %request.payment_id,
            charge_id = %entry.id,
            status = status.as_str(),
            ?behaviour,
            "acquirer recorded a charge"
        );
        match behaviour {
            Behaviour::LoseAnswer => return Err(AcquirerError::Unknown(LOST_ANSWER.to_owned())),
            Behaviour::Slow => tokio::time::sleep(self.config.slow).await,
            Behaviour::Succeed | Behaviour::Decline(_) => {}
        }
        Ok(entry.result())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn behaviour(token: &str) -> Behaviour {
        Behaviour::of(&CardToken::new(token).unwrap())
    }

    #[test]
    fn tokens_choose_behaviour() {
        assert_eq!(behaviour(tokens::OK), Behaviour::Succeed);
        assert_eq!(behaviour("tok_anything_else"), Behaviour::Succeed);
        assert_eq!(
            behaviour(tokens::DECLINED),
            Behaviour::Decline(CARD_DECLINED)
        );
        assert_eq!(
            behaviour(tokens::INSUFFICIENT_FUNDS),
            Behaviour::Decline(INSUFFICIENT_FUNDS)
        );
        assert_eq!(behaviour(tokens::TIMEOUT), Behaviour::LoseAnswer);
        assert_eq!(behaviour(tokens::SLOW), Behaviour::Slow);
    }

    #[test]
    fn only_declines_are_recorded_as_declined() {
        assert_eq!(
            behaviour(tokens::TIMEOUT).outcome(),
            (ChargeStatus::Succeeded, None)
        );
        assert_eq!(
            behaviour(tokens::SLOW).outcome(),
            (ChargeStatus::Succeeded, None)
        );
        assert_eq!(
            behaviour(tokens::DECLINED).outcome(),
            (ChargeStatus::Declined, Some(CARD_DECLINED.to_owned()))
        );
    }

    #[test]
    fn default_slow_is_three_seconds() {
        assert_eq!(SimulatorConfig::default().slow, Duration::from_secs(3));
    }
}
