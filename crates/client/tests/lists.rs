//! The list reads and key introspection of the client against a real
//! server (PostgreSQL and SQLite).

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use chargeonce_client::{CreateRefund, Error, ListParams, PaymentListParams, ProblemCode};
use chargeonce_testkit::on_both_stores;
use common::{Backend, Served};

async fn lists_pages_and_keys_are_read(backend: Backend) {
    let server = common::start(backend).await;
    let client = server.client();
    let mut ids = Vec::new();
    for label in ["a", "b", "c"] {
        let order = common::order(label);
        let result = client
            .pay(&common::pay_key(&order), &common::payment(&order, "tok_ok"))
            .await
            .unwrap();
        let chargeonce_client::Outcome::Paid(payment) = result.outcome else {
            panic!("paid");
        };
        ids.push(payment.id);
    }
    ids.reverse();
    let first = client
        .list_payments(&PaymentListParams {
            page: ListParams {
                limit: Some(2),
                ..ListParams::default()
            },
            ..PaymentListParams::default()
        })
        .await
        .unwrap();
    assert_eq!(
        first.data.iter().map(|p| &p.id).collect::<Vec<_>>(),
        [&ids[0], &ids[1]]
    );
    assert!(first.has_more);
    let rest = client
        .list_payments(&PaymentListParams {
            page: ListParams {
                limit: Some(2),
                starting_after: Some(ids[1].clone()),
                ..ListParams::default()
            },
            status: Some("succeeded".into()),
            ..PaymentListParams::default()
        })
        .await
        .unwrap();
    assert_eq!(rest.data.len(), 1);
    assert!(!rest.has_more);
    let json = client
        .list_payments_json(&PaymentListParams::default())
        .await
        .unwrap();
    assert_eq!(json.data[0]["object"], "payment");

    client
        .refund(
            &ids[0],
            &chargeonce_client::IdempotencyKey::new("refund-1").unwrap(),
            &CreateRefund::full(),
        )
        .await
        .unwrap();
    let refunds = client.list_refunds(&ListParams::default()).await.unwrap();
    assert_eq!(refunds.data.len(), 1);
    let of_payment = client
        .payment_refunds(&ids[0], &ListParams::default())
        .await
        .unwrap();
    assert_eq!(of_payment.data, refunds.data);
    assert!(
        client
            .payment_refunds(&ids[1], &ListParams::default())
            .await
            .unwrap()
            .data
            .is_empty()
    );

    let key = client.idempotency_key("refund-1").await.unwrap();
    assert_eq!(key.state, chargeonce_client::KeyState::Finished);
    assert_eq!(key.refund_id.as_ref(), Some(&refunds.data[0].id));
    match client.idempotency_key("no such key").await {
        Err(Error::Rejected { problem, .. }) => assert_eq!(problem.code, ProblemCode::NotFound),
        other => panic!("{other:?}"),
    }
    match client
        .list_payments(&PaymentListParams {
            page: ListParams {
                starting_after: Some("pay_x".into()),
                ..ListParams::default()
            },
            ..PaymentListParams::default()
        })
        .await
    {
        Err(Error::Rejected { problem, .. }) => {
            assert_eq!(problem.code, ProblemCode::InvalidCursor)
        }
        other => panic!("{other:?}"),
    }
}

on_both_stores!(lists_pages_and_keys_are_read);
