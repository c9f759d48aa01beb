//! The rows of the reconciler's findings and of the console's reads across
//! shops, their shared column lists, and what a finding's writes bind:
//! kept apart from [`crate::rows`] (declared with the same [`rows!`]
//! macro), as both stores read and write them alike.

use chargeonce_core::findings::{Finding, FindingId, FindingKind, Resolution};
use chargeonce_core::store::ShopSummary;
use chargeonce_core::{Currency, Money, PaymentId, Reference, ShopId, StoreError};
use chargeonce_sqlite::rusqlite;

use crate::rows::{At, FromSqliteRow, rows};

/// The columns of a finding row ([`FindingRow`]); its times decode as [`At`]
/// in both dialects.
macro_rules! finding_columns {
    () => {
        "id, kind, shop_id, reference, payment_id, charge_ids, amount_minor, currency, detail, \
         first_seen, last_seen, seen, resolved_at, resolution, resolved_by, resolution_note, \
         refunded_charge_ids"
    };
}
pub(crate) use finding_columns;

/// The columns of a shop as the console lists it ([`ShopSummaryRow`]):
/// never its secrets; its webhook URL is its operator endpoint's.
macro_rules! shop_summary_columns {
    () => {
        "id AS shop_id, (SELECT w.url FROM webhook_endpoints w WHERE w.shop_id = shops.id \
         AND w.origin = 'operator' AND w.deleted_at IS NULL) AS webhook_url, created_at"
    };
}
pub(crate) use shop_summary_columns;

rows! {
    /// A finding row ([`finding_columns`]).
    struct FindingRow {
        id: i64,
        kind: String,
        shop_id: String,
        reference: String,
        payment_id: Option<String>,
        /// A JSON array of strings.
        charge_ids: String,
        amount_minor: Option<i64>,
        currency: Option<String>,
        detail: String,
        first_seen: At,
        last_seen: At,
        seen: i64,
        resolved_at: Option<At>,
        resolution: Option<String>,
        resolved_by: Option<String>,
        resolution_note: Option<String>,
        /// A JSON array of strings, for `refunded`.
        refunded_charge_ids: Option<String>,
    }

    /// What an upsert of a finding reads back: `id, seen, payment_id`
    /// (`seen` is 1 only when the statement inserted it).
    struct UpsertedFindingRow {
        id: i64,
        seen: i64,
        payment_id: Option<String>,
    }

    /// A shop as the console lists it ([`shop_summary_columns`]).
    struct ShopSummaryRow {
        shop_id: String,
        webhook_url: Option<String>,
        created_at: At,
    }
}

/// Charge ids as stored: a JSON array of strings.
pub(crate) fn encode_charges(charges: &[String]) -> Result<String, StoreError> {
    serde_json::to_string(charges).map_err(StoreError::other)
}

fn decode_charges(stored: &str) -> Result<Vec<String>, StoreError> {
    serde_json::from_str(stored).map_err(StoreError::corrupt_by)
}

/// The columns a resolution writes.
pub(crate) struct ResolutionColumns {
    /// `resolution`: its label.
    pub(crate) how: &'static str,
    /// `resolved_by`, for a manual one.
    pub(crate) by: Option<String>,
    /// `resolution_note`, for a manual one.
    pub(crate) note: Option<String>,
    /// `refunded_charge_ids` (a JSON array), for a refund.
    pub(crate) refunded: Option<String>,
}

impl ResolutionColumns {
    /// The columns of `resolution`.
    pub(crate) fn of(resolution: &Resolution) -> Result<Self, StoreError> {
        let how = resolution.as_str();
        Ok(match resolution {
            Resolution::Refunded { charge_ids } => Self {
                how,
                by: None,
                note: None,
                refunded: Some(encode_charges(charge_ids)?),
            },
            Resolution::Manual { by, note } => Self {
                how,
                by: Some(by.clone()),
                note: Some(note.clone()),
                refunded: None,
            },
        })
    }
}

impl TryFrom<FindingRow> for Finding {
    type Error = StoreError;

    fn try_from(row: FindingRow) -> Result<Self, StoreError> {
        let amount = match (row.amount_minor, row.currency) {
            (Some(minor), Some(code)) => Some(
                Money::from_minor(
                    minor,
                    Currency::from_code(&code).map_err(StoreError::corrupt_by)?,
                )
                .map_err(StoreError::corrupt_by)?,
            ),
            (None, None) => None,
            _ => {
                return Err(StoreError::corrupt(format!(
                    "finding {}: an amount without its currency, or the reverse",
                    row.id
                )));
            }
        };
        let resolved = match (row.resolved_at, row.resolution.as_deref()) {
            (None, None) => None,
            (Some(at), Some("refunded")) => Some((
                Resolution::Refunded {
                    charge_ids: row
                        .refunded_charge_ids
                        .as_deref()
                        .map(decode_charges)
                        .transpose()?
                        .unwrap_or_default(),
                },
                at.0,
            )),
            (Some(at), Some("manual")) => Some((
                Resolution::Manual {
                    by: row.resolved_by.unwrap_or_default(),
                    note: row.resolution_note.unwrap_or_default(),
                },
                at.0,
            )),
            (_, resolution) => {
                return Err(StoreError::corrupt(format!(
                    "finding {}: resolution {resolution:?}",
                    row.id
                )));
            }
        };
        Ok(Finding {
            id: FindingId(row.id),
            kind: FindingKind::parse(&row.kind)
                .ok_or_else(|| StoreError::corrupt(format!("finding kind `{}`", row.kind)))?,
            shop_id: ShopId::new(row.shop_id).map_err(StoreError::corrupt_by)?,
            reference: Reference::new(row.reference).map_err(StoreError::corrupt_by)?,
            payment_id: row
                .payment_id
                .map(|id| PaymentId::parse(&id))
                .transpose()
                .map_err(StoreError::corrupt_by)?,
            charge_ids: decode_charges(&row.charge_ids)?,
            amount,
            detail: row.detail,
            first_seen: row.first_seen.0,
            last_seen: row.last_seen.0,
            seen: u64::try_from(row.seen).map_err(StoreError::corrupt_by)?,
            resolved,
        })
    }
}

impl UpsertedFindingRow {
    /// The finding's id, whether the upsert inserted it, and its payment.
    pub(crate) fn parse(self) -> Result<(FindingId, bool, Option<PaymentId>), StoreError> {
        Ok((
            FindingId(self.id),
            self.seen == 1,
            self.payment_id
                .map(|id| PaymentId::parse(&id))
                .transpose()
                .map_err(StoreError::corrupt_by)?,
        ))
    }
}

impl TryFrom<ShopSummaryRow> for ShopSummary {
    type Error = StoreError;

    fn try_from(row: ShopSummaryRow) -> Result<Self, StoreError> {
        Ok(ShopSummary {
            shop_id: ShopId::new(row.shop_id).map_err(StoreError::corrupt_by)?,
            webhook_url: row.webhook_url,
            created_at: row.created_at.0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sorted(mut names: Vec<&'static str>) -> Vec<&'static str> {
        names.sort_unstable();
        names
    }

    #[test]
    fn the_column_lists_name_exactly_the_fields_of_their_rows() {
        let names = |list: &'static str| {
            sorted(
                list.split(", ")
                    .map(|item| item.rsplit(' ').next().unwrap_or(item).trim())
                    .collect(),
            )
        };
        assert_eq!(
            names(finding_columns!()),
            sorted(FindingRow::COLUMNS.to_vec())
        );
        assert_eq!(
            names(shop_summary_columns!()),
            sorted(ShopSummaryRow::COLUMNS.to_vec())
        );
    }
}
