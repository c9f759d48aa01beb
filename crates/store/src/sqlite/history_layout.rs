#![allow(clippy::unwrap_used)]
//! How the SQLite store lays a history out: a payment's `claimed` entry is
//! its row, the entries of one write share rows of `ENTRIES_PER_ROW`. What
//! each write leaves in the history, entry by entry, is the conformance
//! suite's (`tests/conformance/history.rs`), for both stores.

use std::time::Duration;

use chargeonce_core::history::{HistoryEvent, SettledBy};
use chargeonce_core::store::History;
use chargeonce_core::{
    AcquirerCall, AcquirerOutcomeKind, CardToken, Claim, ClaimRequest, Fingerprint, FinishOutcome,
    IdempotencyKey, KeyTiming, Keys, Money, NewPayment, PaymentId, PaymentRequest, PaymentStatus,
    Reference, Settlement, ShopId, ShopSecret, Shops, StoredResponse,
};

use super::super::SqliteStore;
use super::AcquirerAttempt;
use crate::PoolConfig;

const TIMING: KeyTiming = KeyTiming {
    lease: Duration::from_secs(30),
    ttl: Duration::from_secs(3600),
};

struct Setup {
    store: SqliteStore,
    shop: ShopId,
    instance: String,
    dir: std::path::PathBuf,
}

async fn setup(name: &str) -> Setup {
    let dir =
        std::env::temp_dir().join(format!("chargeonce-history-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite://{}", dir.join("history.db").display());
    let config = PoolConfig::default();
    let store = SqliteStore::connect(&url, &config).await.unwrap();
    let shop = ShopId::new("shop").unwrap();
    store
        .add_shop(&shop, &ShopSecret::from_string("s").hash())
        .await
        .unwrap();
    Setup {
        store,
        shop,
        instance: config.instance,
        dir,
    }
}

impl Setup {
    fn claim(&self, key: &str, body: &str) -> ClaimRequest {
        ClaimRequest {
            shop_id: self.shop.clone(),
            key: IdempotencyKey::new(key).unwrap(),
            fingerprint: Fingerprint::compute(
                "POST",
                "/v1/payments",
                &serde_json::json!({ "b": body }),
            )
            .unwrap(),
            method: "POST".into(),
            path: "/v1/payments".into(),
        }
    }

    async fn pay(&self, key: &str, reference: &str) -> Claim {
        let payment = NewPayment::new(
            self.shop.clone(),
            IdempotencyKey::new(key).unwrap(),
            PaymentRequest {
                amount: Money::parse("15.00", "RUB").unwrap(),
                reference: Reference::new(reference).unwrap(),
                token: CardToken::new("tok_ok").unwrap(),
                metadata: Default::default(),
                capture_method: chargeonce_core::CaptureMethod::Automatic,
            },
        );
        self.store
            .claim_payment(&self.claim(key, reference), &payment, TIMING)
            .await
            .unwrap()
    }

    async fn events(&self, id: &PaymentId) -> Vec<HistoryEvent> {
        self.store
            .payment_history(Some(&self.shop), id)
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.event)
            .collect()
    }

    async fn close(self) {
        self.store.close().await;
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn acquired(claim: Claim) -> chargeonce_core::Acquired {
    match claim {
        Claim::Acquired(acquired) => acquired,
        Claim::Exists(record) => panic!("expected a new claim, got {record:?}"),
    }
}

fn attempt(call: AcquirerCall, outcome: AcquirerOutcomeKind) -> AcquirerAttempt {
    AcquirerAttempt {
        call,
        outcome,
        latency: Duration::from_millis(7),
        acquirer_key: "ak".into(),
        reason: None,
    }
}

fn answer() -> StoredResponse {
    StoredResponse {
        status: 201,
        headers: Vec::new(),
        body: b"{}".to_vec(),
    }
}

fn succeeded() -> Settlement {
    Settlement {
        status: PaymentStatus::Succeeded,
        provider_payment_id: Some("ch_1".into()),
        decline_code: None,
    }
}

/// A write's entries share a row (as many rows as `ENTRIES_PER_ROW`
/// needs) and read back one by one, in order, with increasing `seq`.
#[tokio::test]
async fn the_entries_of_one_write_share_a_row() {
    let s = setup("rows").await;
    let first = acquired(s.pay("k1", "order-1").await);
    let payment = first.payment.clone();
    // Many calls under one lease: more entries than one row holds.
    let calls: Vec<AcquirerAttempt> = (0..super::ENTRIES_PER_ROW + 3)
        .map(|i| AcquirerAttempt {
            acquirer_key: format!("ak{i}"),
            ..attempt(AcquirerCall::Charge, AcquirerOutcomeKind::Unknown)
        })
        .collect();
    let done = s
        .store
        .finish(
            &first.lease,
            Some((&payment, &succeeded())),
            &answer(),
            TIMING.ttl,
            &calls,
        )
        .await
        .unwrap();
    assert_eq!(done, FinishOutcome::Stored);

    let entries = s
        .store
        .payment_history(Some(&s.shop), &payment.id)
        .await
        .unwrap();
    let mut expected = vec![HistoryEvent::Claimed {
        key: "k1".into(),
        instance: s.instance.clone(),
    }];
    expected.extend(calls.iter().map(|call| call.to_event(&s.instance)));
    expected.push(HistoryEvent::Answered {
        key: "k1".into(),
        status: 201,
    });
    expected.push(HistoryEvent::Settled {
        status: PaymentStatus::Succeeded,
        by: SettledBy::Request { key: "k1".into() },
    });
    assert_eq!(
        entries.iter().map(|e| e.event.clone()).collect::<Vec<_>>(),
        expected
    );
    assert!(
        entries.windows(2).all(|w| w[0].seq < w[1].seq),
        "{entries:?}"
    );
    assert!(entries.iter().all(|e| e.payment_id == payment.id));

    // The claim's entry is the payment's row; the finish's 21 entries
    // are two rows.
    let db = chargeonce_sqlite::rusqlite::Connection::open(s.dir.join("history.db")).unwrap();
    let kinds: Vec<String> = db
        .prepare("SELECT kind FROM payment_history WHERE payment_id = ?1 ORDER BY seq")
        .unwrap()
        .query_map([payment.id.as_str()], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(kinds.len(), 2, "{kinds:?}");
    assert_eq!(kinds[0].split(',').count(), super::ENTRIES_PER_ROW);
    assert!(kinds[1].ends_with(",answered,settled"), "{kinds:?}");
    assert_eq!(entries[0].seq, super::CLAIM_SEQ);
    drop(db);
    s.close().await;
}

/// A payment's `claimed` entry is its row, read first; a payment
/// claimed before migration 0009 (no `claimed_by`, a `claimed` row)
/// reads its row's entry instead, once; another shop reads nothing.
#[tokio::test]
async fn the_claim_is_read_from_the_payment_row() {
    let s = setup("claim-row").await;
    let new = acquired(s.pay("k1", "order-1").await).payment;
    let old = acquired(s.pay("k2", "order-2").await).payment;
    let db = chargeonce_sqlite::rusqlite::Connection::open(s.dir.join("history.db")).unwrap();
    let rows: i64 = db
        .query_row("SELECT count(*) FROM payment_history", [], |row| row.get(0))
        .unwrap();
    assert_eq!(rows, 0, "a claim writes no history row");
    // What a payment claimed before the migration looks like.
    db.execute(
        "UPDATE payments SET claimed_by = NULL WHERE id = ?1",
        [old.id.as_str()],
    )
    .unwrap();
    db.execute(
        "INSERT INTO payment_history (payment_id, at, kind, event) \
         VALUES (?1, 1, 'claimed', ?2)",
        [
            old.id.as_str(),
            &HistoryEvent::Claimed {
                key: "k2".into(),
                instance: "before".into(),
            }
            .to_json(),
        ],
    )
    .unwrap();
    drop(db);

    let entries = s
        .store
        .payment_history(Some(&s.shop), &new.id)
        .await
        .unwrap();
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0].seq, super::CLAIM_SEQ);
    assert_eq!(
        super::unix_ms(entries[0].at),
        super::unix_ms(new.created_at)
    );
    assert_eq!(
        entries[0].event,
        HistoryEvent::Claimed {
            key: "k1".into(),
            instance: s.instance.clone(),
        }
    );
    assert_eq!(
        s.events(&old.id).await,
        vec![HistoryEvent::Claimed {
            key: "k2".into(),
            instance: "before".into(),
        }]
    );
    let other = ShopId::new("someone-else").unwrap();
    assert!(
        s.store
            .payment_history(Some(&other), &new.id)
            .await
            .unwrap()
            .is_empty()
    );
    s.close().await;
}
