//! The webhook events a recorded charge puts in the ledger's outbox.

use chargeonce_core::webhook::{AcquirerEvent, EventAmount, EventCharge, EventKind};
use uuid::Uuid;

use super::Simulator;
use crate::ledger::{OutboxEvent, unix_millis};
use crate::{ChargeStatus, LedgerEntry};

impl Simulator {
    /// The outbox events one recorded charge causes.
    pub(super) fn events_for(&self, entry: &LedgerEntry) -> Vec<OutboxEvent> {
        if !self.events {
            return Vec::new();
        }
        let created = unix_millis(entry.created_at);
        let (reorder, delay) = self.roll(|f, rng| {
            use rand::Rng;
            (
                f.webhook_reorder_rate > 0.0 && rng.random_bool(f.webhook_reorder_rate),
                i64::try_from(f.webhook_reorder_ms).unwrap_or(i64::MAX),
            )
        });
        let terminal = match entry.status {
            ChargeStatus::Succeeded => EventKind::Succeeded,
            ChargeStatus::Declined => EventKind::Declined,
        };
        // Normally `processing` goes first; held back, the outcome overtakes it.
        let processing_due = if reorder {
            created.saturating_add(delay)
        } else {
            created
        };
        [
            (EventKind::Processing, created, processing_due),
            (terminal, created + 1, created + 1),
        ]
        .into_iter()
        .filter_map(|(kind, at, due_at)| {
            let event = AcquirerEvent {
                id: format!("evt_{}", Uuid::now_v7().simple()),
                kind,
                created: at,
                data: EventCharge {
                    charge_id: entry.id.clone(),
                    acquirer_key: entry.acquirer_key.as_str().to_owned(),
                    shop_id: entry.shop_id.as_str().to_owned(),
                    payment_id: entry.payment_id.as_str().to_owned(),
                    reference: entry.reference.as_str().to_owned(),
                    amount: EventAmount {
                        value: entry.amount.to_decimal_string(),
                        currency: entry.amount.currency().code().to_owned(),
                    },
                    decline_code: match kind {
                        EventKind::Declined => entry.decline_code.clone(),
                        _ => None,
                    },
                },
            };
            let payload = serde_json::to_string(&event).ok()?;
            Some(OutboxEvent {
                id: event.id,
                charge_id: entry.id.clone(),
                kind: kind.as_str().to_owned(),
                payload,
                created_at: at,
                due_at,
                attempts: 0,
            })
        })
        .collect()
    }
}
