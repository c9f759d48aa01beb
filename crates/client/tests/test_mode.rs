//! Test mode through the client against a real server (PostgreSQL and
//! SQLite): the shop's live key and a test key (`sk_test_...`, made in the
//! store the server uses, as `chargeonce shops keys add --mode test` makes
//! it) pay with the same idempotency key and the same order reference: two
//! payments, one of each mode (`livemode` true and false), and each key's
//! look-up of the other mode's payment is `404 not_found`.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::time::Duration;

use chargeonce_client::{Client, Error, Outcome, ProblemCode};
use chargeonce_core::ShopId;
use chargeonce_core::api_key::{Mode, Scope};
use chargeonce_core::keyring::{self, KeyRequest};
use chargeonce_testkit::{TestService, on_both_stores};
use common::{Backend, Served};

/// A full test-mode key of the test kit's shop: its secret.
async fn test_key(server: &TestService) -> String {
    let shop = ShopId::new(common::SHOP).unwrap();
    let request = KeyRequest {
        mode: Mode::Test,
        scope: Scope::Full,
        description: Some("client test mode".into()),
        expires_at: None,
    };
    let made = keyring::make(server.store.as_ref(), &shop, request)
        .await
        .unwrap()
        .unwrap();
    let secret = made.secret.expose().to_owned();
    assert!(secret.starts_with("sk_test_"), "{secret}");
    secret
}

fn client_with(base: &str, secret: &str) -> Client {
    Client::builder(base, common::SHOP, secret)
        .retry_policy(common::fast_policy())
        .connect_timeout(Duration::from_secs(2))
        .build()
        .unwrap()
}

/// The status and code of a refusal.
fn refusal(error: &Error) -> (u16, ProblemCode) {
    match error {
        Error::Rejected { problem, .. } => (problem.status, problem.code.known().unwrap()),
        other => panic!("a refusal: {other:?}"),
    }
}

async fn the_same_key_and_order_pay_once_in_each_mode(backend: Backend) {
    let server = common::start(backend).await;
    let live = server.client();
    let test = client_with(&server.base, &test_key(&server).await);

    let order = common::order("test-mode");
    let key = common::pay_key(&order);
    let request = common::payment(&order, "tok_ok");
    let paid = |result: chargeonce_client::PayResult| match result.outcome {
        Outcome::Paid(payment) => payment,
        other => panic!("paid: {other:?}"),
    };
    let live_payment = paid(live.pay(&key, &request).await.unwrap());
    let test_payment = paid(test.pay(&key, &request).await.unwrap());

    assert_ne!(live_payment.id, test_payment.id, "two payments");
    assert!(live_payment.livemode, "{live_payment:?}");
    assert!(!test_payment.livemode, "{test_payment:?}");
    assert_eq!(live_payment.reference, test_payment.reference);
    // The shop's own id in either mode.
    assert_eq!(test_payment.shop_id, common::SHOP);

    // Each key reads its own mode's payment, and not the other's.
    assert!(live.payment(&live_payment.id).await.unwrap().livemode);
    assert!(!test.payment(&test_payment.id).await.unwrap().livemode);
    let refused = live.payment(&test_payment.id).await.unwrap_err();
    assert_eq!(refusal(&refused), (404, ProblemCode::NotFound));
    let refused = test.payment(&live_payment.id).await.unwrap_err();
    assert_eq!(refusal(&refused), (404, ProblemCode::NotFound));

    // Only the live payment reached the live acquirer.
    assert_eq!(server.charges_for(&order).await, 1);
}

on_both_stores!(the_same_key_and_order_pay_once_in_each_mode);
