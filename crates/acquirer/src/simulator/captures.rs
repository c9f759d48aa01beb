//! Authorizations at the simulator: captures and voids, their records,
//! their refusals, and the core's view of their answers. An authorization is
//! a charge made with [`CaptureMethod::Manual`](chargeonce_core::CaptureMethod::Manual).

use chargeonce_core::{
    AcquirerCapture, AcquirerError, CaptureRequest, CaptureSettlement, Currency, Money,
    VoidRequest, VoidSettlement,
};
use uuid::Uuid;

use super::{Behaviour, LOST_ANSWER, Simulator};
use crate::entry::now_millis;
use crate::ledger::{CaptureRow, NewCaptureRow, VoidRow, unix_millis};
use crate::{CaptureError, SimulatorError};

pub use chargeonce_connector::protocol::{
    AUTHORIZATION_CLOSED, AUTHORIZATION_VOIDED, CAPTURE_EXCEEDS_AUTHORIZATION,
    CHARGE_NOT_CAPTURABLE, REFUND_NO_SUCH_CHARGE,
};

/// A capture at the simulator.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CaptureRecord {
    /// The capture's id (`cp_...`).
    pub id: String,
    /// The authorization it takes money from.
    pub charge_id: String,
    /// Minor units taken.
    pub amount_minor: i64,
    /// Its currency.
    pub currency: String,
    /// Whether it was the last capture.
    pub last: bool,
    /// Unix ms.
    pub created_at: i64,
}

/// A void at the simulator.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct VoidRecord {
    /// The void's id (`vd_...`).
    pub id: String,
    /// The authorization whose rest it released.
    pub charge_id: String,
    /// Minor units released.
    pub released_minor: i64,
    /// Its currency.
    pub currency: String,
    /// Unix ms.
    pub created_at: i64,
}

impl From<CaptureRow> for CaptureRecord {
    fn from(row: CaptureRow) -> Self {
        Self {
            id: row.id,
            charge_id: row.charge_id,
            amount_minor: row.amount_minor,
            currency: row.currency,
            last: row.last,
            created_at: row.created_at,
        }
    }
}

impl From<VoidRow> for VoidRecord {
    fn from(row: VoidRow) -> Self {
        Self {
            id: row.id,
            charge_id: row.charge_id,
            released_minor: row.released_minor,
            currency: row.currency,
            created_at: row.created_at,
        }
    }
}

impl Simulator {
    /// Takes `amount_minor` of the authorization `charge_id` (`None`: what
    /// is left, as the last capture) under the caller's `reference` (its
    /// capture id), once per `acquirer_key` unless the simulator runs
    /// without idempotency. `true` when this call executed it.
    pub async fn capture_part(
        &self,
        charge_id: &str,
        acquirer_key: &str,
        amount_minor: Option<i64>,
        last: bool,
        reference: Option<&str>,
    ) -> Result<(CaptureRecord, bool), CaptureError> {
        let new = NewCaptureRow {
            id: format!("cp_{}", Uuid::now_v7().simple()),
            reference: reference.map(str::to_owned),
            at: unix_millis(now_millis()),
            deduplicated: self.idempotent,
        };
        let (row, first) = self
            .ledger
            .capture(charge_id, acquirer_key, amount_minor, last, new)
            .await?;
        if first {
            tracing::info!(charge_id, capture_id = %row.id, amount_minor = row.amount_minor, last = row.last, "acquirer captured");
        }
        Ok((row.into(), first))
    }

    /// Releases what is left of the authorization `charge_id`, once: a
    /// repeat under the same key returns the first void.
    pub async fn void_charge(
        &self,
        charge_id: &str,
        acquirer_key: &str,
    ) -> Result<(VoidRecord, bool), CaptureError> {
        let id = format!("vd_{}", Uuid::now_v7().simple());
        let at = unix_millis(now_millis());
        let (row, first) = self.ledger.void(charge_id, acquirer_key, id, at).await?;
        if first {
            tracing::info!(charge_id, void_id = %row.id, released_minor = row.released_minor, "acquirer voided");
        }
        Ok((row.into(), first))
    }

    /// The captures of an authorization: all, or those made under the
    /// caller's `reference`, oldest first.
    pub async fn captures_of(
        &self,
        charge_id: &str,
        reference: Option<&str>,
    ) -> Result<Vec<CaptureRecord>, SimulatorError> {
        Ok(self
            .ledger
            .captures(charge_id, reference)
            .await?
            .into_iter()
            .map(CaptureRecord::from)
            .collect())
    }

    /// [`chargeonce_core::Acquirer::capture`] at the simulator: the
    /// token's behaviour (`tok_timeout` loses the answer of the execution
    /// that recorded the capture; `tok_slow` answers late).
    pub(super) async fn capture_for(
        &self,
        request: &CaptureRequest,
    ) -> Result<CaptureSettlement, AcquirerError> {
        let behaviour = Behaviour::of(&request.token);
        let answer = self
            .capture_part(
                &request.charge_id,
                request.acquirer_key.as_str(),
                Some(request.amount.minor_units()),
                request.last,
                Some(request.capture_id.as_str()),
            )
            .await;
        if behaviour == Behaviour::Slow {
            tokio::time::sleep(self.config.slow).await;
        }
        capture_settlement(answer, behaviour == Behaviour::LoseAnswer)
    }

    /// [`chargeonce_core::Acquirer::void`] at the simulator, with the
    /// token's behaviour as for captures.
    pub(super) async fn void_for(
        &self,
        request: &VoidRequest,
    ) -> Result<VoidSettlement, AcquirerError> {
        let behaviour = Behaviour::of(&request.token);
        let answer = self
            .void_charge(&request.charge_id, request.acquirer_key.as_str())
            .await;
        if behaviour == Behaviour::Slow {
            tokio::time::sleep(self.config.slow).await;
        }
        void_settlement(answer, behaviour == Behaviour::LoseAnswer)
    }

    /// [`chargeonce_core::Acquirer::captures_for_capture`] at the simulator.
    pub(super) async fn captures_for(
        &self,
        request: &CaptureRequest,
    ) -> Result<Vec<AcquirerCapture>, AcquirerError> {
        self.captures_of(&request.charge_id, Some(request.capture_id.as_str()))
            .await
            .map_err(|e| AcquirerError::Unknown(format!("acquirer ledger read failed: {e}")))?
            .into_iter()
            .map(capture_of)
            .collect()
    }
}

/// The code of a definite refusal, or the error that is not one.
fn refusal(error: CaptureError) -> Result<String, AcquirerError> {
    Ok(match error {
        CaptureError::NoSuchCharge(_) => REFUND_NO_SUCH_CHARGE.to_owned(),
        CaptureError::NotCapturable(_) => CHARGE_NOT_CAPTURABLE.to_owned(),
        CaptureError::Voided(_) => AUTHORIZATION_VOIDED.to_owned(),
        CaptureError::Closed(_) => AUTHORIZATION_CLOSED.to_owned(),
        CaptureError::ExceedsAuthorization(_) => CAPTURE_EXCEEDS_AUTHORIZATION.to_owned(),
        // The key's first request may well have moved money.
        CaptureError::KeyReused(key) => {
            return Err(AcquirerError::Unknown(format!(
                "{}: {key}",
                chargeonce_connector::protocol::KEY_REUSED
            )));
        }
        CaptureError::Ledger(error) => {
            return Err(AcquirerError::Unknown(format!(
                "acquirer ledger write failed: {error}"
            )));
        }
    })
}

/// The core's answer for a capture: refusals are definite; `lose_first`
/// loses the answer of the execution that recorded the capture.
pub(crate) fn capture_settlement(
    answer: Result<(CaptureRecord, bool), CaptureError>,
    lose_first: bool,
) -> Result<CaptureSettlement, AcquirerError> {
    match answer {
        Ok((_, true)) if lose_first => Err(AcquirerError::Unknown(LOST_ANSWER.to_owned())),
        Ok((record, _)) => Ok(CaptureSettlement::Succeeded {
            provider_capture_id: record.id,
        }),
        Err(error) => Ok(CaptureSettlement::Failed {
            code: refusal(error)?,
        }),
    }
}

/// The core's answer for a void, as for captures.
pub(crate) fn void_settlement(
    answer: Result<(VoidRecord, bool), CaptureError>,
    lose_first: bool,
) -> Result<VoidSettlement, AcquirerError> {
    match answer {
        Ok((_, true)) if lose_first => Err(AcquirerError::Unknown(LOST_ANSWER.to_owned())),
        Ok((record, _)) => Ok(VoidSettlement::Succeeded {
            released: money(record.released_minor, &record.currency)?,
            provider_void_id: record.id,
        }),
        // A closed authorization has nothing left to release.
        Err(CaptureError::Closed(_)) => Ok(VoidSettlement::Failed {
            code: chargeonce_connector::protocol::NOTHING_TO_VOID.to_owned(),
        }),
        Err(error) => Ok(VoidSettlement::Failed {
            code: refusal(error)?,
        }),
    }
}

fn money(minor: i64, currency: &str) -> Result<Money, AcquirerError> {
    let bad = |e: String| AcquirerError::Unknown(format!("capture record unreadable: {e}"));
    let currency = Currency::from_code(currency).map_err(|e| bad(e.to_string()))?;
    Money::from_minor(minor, currency).map_err(|e| bad(e.to_string()))
}

/// The core's view of a capture record.
fn capture_of(record: CaptureRecord) -> Result<AcquirerCapture, AcquirerError> {
    Ok(AcquirerCapture {
        amount: money(record.amount_minor, &record.currency)?,
        id: record.id,
        charge_id: record.charge_id,
        last: record.last,
    })
}
