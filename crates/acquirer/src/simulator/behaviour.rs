//! Card tokens, the behaviour they choose, and the codes of the answers.

#[cfg(doc)]
use chargeonce_core::AcquirerError;
use chargeonce_core::CardToken;

use crate::ChargeStatus;
#[cfg(doc)]
use crate::SimulatorConfig;

/// Decline code of `tok_declined`.
pub const CARD_DECLINED: &str = "card_declined";

/// Decline code of `tok_insufficient_funds`.
pub const INSUFFICIENT_FUNDS: &str = "insufficient_funds";

/// What the simulator says when an acquirer key is reused with other
/// parameters, as a real provider's idempotency error (the protocol's code,
/// [`chargeonce_connector::protocol::KEY_REUSED`]). The attempt is NOT
/// recorded.
pub use chargeonce_connector::protocol::KEY_REUSED;

/// Decline code of a token the simulator does not know (a typo such as
/// `tok_declinde` must not charge the card: a test meant to see a decline
/// would pass without one).
pub const UNKNOWN_TOKEN: &str = "unknown_token";

/// Decline code of charges declined by the fault injector's decline rate.
pub const DO_NOT_HONOR: &str = "do_not_honor";

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
    /// In flight at the acquirer: recorded only after
    /// [`SimulatorConfig::slow`](crate::SimulatorConfig::slow), whether or
    /// not the caller still waits (its refunds too), then answered.
    pub const LATE: &str = "tok_late";

    /// Every token above; any other is declined with
    /// [`UNKNOWN_TOKEN`](super::UNKNOWN_TOKEN).
    pub const ALL: [&str; 6] = [OK, DECLINED, INSUFFICIENT_FUNDS, TIMEOUT, SLOW, LATE];
}

/// How the simulator treats a charge, chosen by its card token.
///
/// | token | behaviour |
/// |---|---|
/// | `tok_ok` | [`Behaviour::Succeed`] |
/// | `tok_declined` | [`Behaviour::Decline`] with `card_declined` |
/// | `tok_insufficient_funds` | [`Behaviour::Decline`] with `insufficient_funds` |
/// | `tok_timeout` | [`Behaviour::LoseAnswer`] |
/// | `tok_slow` | [`Behaviour::Slow`] |
/// | `tok_late` | [`Behaviour::Late`] |
/// | any other token | [`Behaviour::Decline`] with `unknown_token` ([`UNKNOWN_TOKEN`]) |
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
    /// Waits [`SimulatorConfig::slow`], then charges and answers `Succeeded`.
    /// The charge is made even when the caller gave up meanwhile: a
    /// provider's processing does not stop when its client's timeout fires.
    /// A refund of such a payment is recorded late the same way.
    Late,
}

impl Behaviour {
    /// The behaviour a token selects.
    pub fn of(token: &CardToken) -> Self {
        match token.as_str() {
            tokens::DECLINED => Self::Decline(CARD_DECLINED),
            tokens::INSUFFICIENT_FUNDS => Self::Decline(INSUFFICIENT_FUNDS),
            tokens::TIMEOUT => Self::LoseAnswer,
            tokens::SLOW => Self::Slow,
            tokens::LATE => Self::Late,
            tokens::OK => Self::Succeed,
            _ => Self::Decline(UNKNOWN_TOKEN),
        }
    }

    /// What the ledger records for it.
    pub(super) fn outcome(&self) -> (ChargeStatus, Option<String>) {
        match self {
            Self::Decline(code) => (ChargeStatus::Declined, Some((*code).to_owned())),
            Self::Succeed | Self::LoseAnswer | Self::Slow | Self::Late => {
                (ChargeStatus::Succeeded, None)
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::SimulatorConfig;

    fn behaviour(token: &str) -> Behaviour {
        Behaviour::of(&CardToken::new(token).unwrap())
    }

    #[test]
    fn tokens_choose_behaviour() {
        assert_eq!(behaviour(tokens::OK), Behaviour::Succeed);
        for unknown in [
            "tok_anything_else",
            "tok_declinde",
            "tok_OK",
            "ok",
            "tok_ok_",
        ] {
            assert_eq!(
                behaviour(unknown),
                Behaviour::Decline(UNKNOWN_TOKEN),
                "{unknown:?}"
            );
        }
        for known in tokens::ALL {
            assert_ne!(behaviour(known), Behaviour::Decline(UNKNOWN_TOKEN));
        }
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
