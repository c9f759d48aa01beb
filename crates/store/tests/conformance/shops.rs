//! Shops: their secrets, and keys and payments kept apart per shop.

use chargeonce_core::{Claim, SecretHash, ShopId, ShopSecret, StoreError};
use chargeonce_testkit::on_both_stores;

use crate::support::*;

async fn shops_are_kept_apart(f: Fixture) {
    let secret = ShopSecret::generate();
    let other = f.other_shop(&secret).await;
    assert!(matches!(
        f.store
            .add_shop(&other, &SecretHash::from_bytes(&[0; 32]).unwrap())
            .await,
        Err(StoreError::ShopExists(_))
    ));
    // Its secret is its first key: live, full, active.
    let keys = f.store.shop_keys(&other).await.unwrap().unwrap();
    assert_eq!(keys.len(), 1);
    assert!(keys[0].hash.verify(&secret));
    assert_eq!(keys[0].key.mode, chargeonce_core::api_key::Mode::Live);
    assert_eq!(keys[0].key.scope, chargeonce_core::api_key::Scope::Full);
    assert!(keys[0].key.active_at(time::OffsetDateTime::now_utc()));
    assert!(
        f.store
            .shop_keys(&ShopId::new("nobody").unwrap())
            .await
            .unwrap()
            .is_none()
    );
    // The same key and order in two shops are two claims and two payments.
    let (_, a) = f.claimed("k1", "order-1", LONG).await;
    let Claim::Acquired(chargeonce_core::Acquired { payment: b, .. }) = f
        .store
        .claim_payment(
            &claim(&other, "k1", "order-1"),
            &new_payment(&other, "k1", "order-1"),
            LONG,
        )
        .await
        .unwrap()
    else {
        panic!("shop B's key is its own")
    };
    assert_ne!(a.id, b.id);
    assert!(
        f.store.payment(&other, &a.id).await.unwrap().is_none(),
        "B cannot read A's payment"
    );
    assert!(
        f.store
            .key(&other, &key("k1"))
            .await
            .unwrap()
            .unwrap()
            .payment_id
            == Some(b.id)
    );
}

on_both_stores!(
    fixture =>
    shops_are_kept_apart,
);
