//! A payment's history as a client reads it: an entry of a type a newer
//! server added is kept as sent, and the rest of the history with it.
#![allow(clippy::unwrap_used)]

use chargeonce_wire::{HistoryEvent, PaymentHistory};
use serde_json::json;

#[test]
fn an_entry_of_a_type_this_version_does_not_know_is_kept_as_sent() {
    let history = json!({
        "object": "payment_history",
        "payment_id": "pay_1",
        "entries": [
            {"seq": 0, "at": "2026-12-04T08:00:00Z", "refund_id": null,
             "type": "claimed", "key": "k-1", "instance": "a"},
            {"seq": 16, "at": "2026-12-04T08:00:01Z", "refund_id": null,
             "type": "disputed", "dispute_id": "dp_1", "amount": {"value": "1.00", "currency": "RUB"}},
            {"seq": 32, "at": "2026-12-04T08:00:02Z", "refund_id": null,
             "type": "answered", "key": "k-1", "status": 201}
        ],
        "keys": []
    });
    let history: PaymentHistory = serde_json::from_value(history).unwrap();
    let events: Vec<&HistoryEvent> = history.entries.iter().map(|e| &e.event).collect();
    assert_eq!(
        events,
        [
            &HistoryEvent::Claimed {
                key: "k-1".into(),
                instance: "a".into()
            },
            &HistoryEvent::Unknown {
                kind: "disputed".into(),
                members: serde_json::from_value(json!({
                    "dispute_id": "dp_1",
                    "amount": {"value": "1.00", "currency": "RUB"}
                }))
                .unwrap()
            },
            &HistoryEvent::Answered {
                key: "k-1".into(),
                status: 201
            },
        ]
    );
    assert_eq!(history.entries[1].seq, 16);
}

#[test]
fn the_server_cannot_send_an_unknown_entry() {
    let unknown = HistoryEvent::Unknown {
        kind: "disputed".into(),
        members: serde_json::Map::new(),
    };
    assert!(serde_json::to_value(unknown).is_err());
}
