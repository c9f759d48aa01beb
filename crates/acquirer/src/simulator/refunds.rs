//! Refunds at the simulator: their records, their refusals, the
//! [`Simulator`]'s refund operations and the core's view of their answers.

use chargeonce_core::{AcquirerError, AcquirerRefund, Currency, Money, RefundSettlement};
use uuid::Uuid;

use super::{LOST_ANSWER, Simulator};
use crate::entry::now_millis;
use crate::ledger::{Ledger, NewRefundRow, RefundRow, unix_millis};
use crate::{RefundError, SimulatorError};

/// A refund at the simulator, as `POST /v1/charges/{id}/refunds` shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RefundRecord {
    /// The refund's id (`re_...`).
    pub id: String,
    /// The refunded charge.
    pub charge_id: String,
    /// Minor units given back.
    pub amount_minor: i64,
    /// Its currency.
    pub currency: String,
    /// Unix ms.
    pub created_at: i64,
}

impl From<RefundRow> for RefundRecord {
    fn from(row: RefundRow) -> Self {
        Self {
            id: row.id,
            charge_id: row.charge_id,
            amount_minor: row.amount_minor,
            currency: row.currency,
            created_at: row.created_at,
        }
    }
}

impl Simulator {
    /// Refunds a whole succeeded charge, once (in every mode: this is the
    /// ledger's settlement tool, not the payment API): a repeat returns the
    /// first refund.
    pub async fn refund_charge(&self, charge_id: &str) -> Result<RefundRecord, RefundError> {
        let key = format!("refund-{charge_id}");
        self.refunder(true)
            .refund(charge_id, &key, None, None)
            .await
            .map(|(record, _)| record)
    }

    /// Refunds `amount_minor` of a charge (`None`: what is left of it) under
    /// the caller's `reference` (its refund id), once per `acquirer_key`
    /// unless the simulator runs without idempotency: a repeat returns the
    /// first refund under the key and `false`; `true` when this call
    /// executed it.
    pub async fn refund_part(
        &self,
        charge_id: &str,
        acquirer_key: &str,
        amount_minor: Option<i64>,
        reference: Option<&str>,
    ) -> Result<(RefundRecord, bool), RefundError> {
        self.refunder(self.idempotent)
            .refund(charge_id, acquirer_key, amount_minor, reference)
            .await
    }

    /// Every refund of a charge made under the caller's `reference`, oldest first.
    pub async fn refunds_for_reference(
        &self,
        charge_id: &str,
        reference: &str,
    ) -> Result<Vec<RefundRecord>, SimulatorError> {
        Ok(self
            .ledger
            .refunds_for_reference(charge_id, reference)
            .await?
            .into_iter()
            .map(RefundRecord::from)
            .collect())
    }

    pub(super) fn refunder(&self, deduplicated: bool) -> Refunder {
        Refunder {
            ledger: self.ledger.clone(),
            deduplicated,
        }
    }

    /// Every refund, oldest first.
    pub async fn refunds(&self) -> Result<Vec<RefundRecord>, SimulatorError> {
        Ok(self
            .ledger
            .refunds()
            .await?
            .into_iter()
            .map(RefundRecord::from)
            .collect())
    }
}

/// Records refunds in the ledger, deduplicated on the acquirer key or not.
#[derive(Debug, Clone)]
pub(super) struct Refunder {
    ledger: Ledger,
    deduplicated: bool,
}

impl Refunder {
    pub(super) async fn refund(
        &self,
        charge_id: &str,
        acquirer_key: &str,
        amount_minor: Option<i64>,
        reference: Option<&str>,
    ) -> Result<(RefundRecord, bool), RefundError> {
        let new = NewRefundRow {
            id: format!("re_{}", Uuid::now_v7().simple()),
            reference: reference.map(str::to_owned),
            at: unix_millis(now_millis()),
            deduplicated: self.deduplicated,
        };
        let (row, first) = self
            .ledger
            .refund(charge_id, acquirer_key, amount_minor, new)
            .await?;
        if first {
            tracing::info!(charge_id, refund_id = %row.id, amount_minor = row.amount_minor, "acquirer refunded a charge");
        }
        Ok((row.into(), first))
    }
}

/// The core's answer for a refund at the simulator: refusals are definite;
/// `lose_first` loses the answer of the execution that recorded the refund.
pub(crate) fn refund_settlement(
    answer: Result<(RefundRecord, bool), RefundError>,
    lose_first: bool,
) -> Result<RefundSettlement, AcquirerError> {
    match answer {
        Ok((_, true)) if lose_first => Err(AcquirerError::Unknown(LOST_ANSWER.to_owned())),
        Ok((record, _)) => Ok(RefundSettlement::Succeeded {
            provider_refund_id: record.id,
        }),
        Err(RefundError::NoSuchCharge(_)) => Ok(RefundSettlement::Failed {
            code: REFUND_NO_SUCH_CHARGE.to_owned(),
        }),
        Err(RefundError::Declined(_)) => Ok(RefundSettlement::Failed {
            code: REFUND_CHARGE_DECLINED.to_owned(),
        }),
        Err(RefundError::ExceedsCharge(_)) => Ok(RefundSettlement::Failed {
            code: REFUND_EXCEEDS_CHARGE.to_owned(),
        }),
        Err(RefundError::Ledger(error)) => Err(AcquirerError::Unknown(format!(
            "acquirer ledger write failed: {error}"
        ))),
    }
}

pub use chargeonce_connector::protocol::{
    REFUND_CHARGE_DECLINED, REFUND_EXCEEDS_CHARGE, REFUND_NO_SUCH_CHARGE,
};

/// The core's view of a refund record.
pub(crate) fn refund_of(record: RefundRecord) -> Result<AcquirerRefund, AcquirerError> {
    let bad = |e: String| AcquirerError::Unknown(format!("refund record unreadable: {e}"));
    let currency = Currency::from_code(&record.currency).map_err(|e| bad(e.to_string()))?;
    let amount =
        Money::from_minor(record.amount_minor, currency).map_err(|e| bad(e.to_string()))?;
    Ok(AcquirerRefund {
        id: record.id,
        charge_id: record.charge_id,
        amount,
    })
}
