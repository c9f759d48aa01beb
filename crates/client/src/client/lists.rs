//! The list reads and key introspection: `GET /v1/payments`,
//! `GET /v1/refunds`, `GET /v1/payments/{id}/refunds`,
//! `GET /v1/payments/{id}/captures` and
//! `GET /v1/idempotency-keys/{key}`.

use serde::de::DeserializeOwned;

use super::Client;
use crate::{
    Capture, Error, IdempotencyKeyInfo, ListParams, Page, Payment, PaymentListParams, Refund,
};

impl Client {
    /// `GET /v1/payments`: one page of this shop's payments, newest first.
    pub async fn list_payments(&self, params: &PaymentListParams) -> Result<Page<Payment>, Error> {
        self.payments_page(params).await
    }

    /// [`Client::list_payments`] with each payment as the JSON the server
    /// sent (for tools that print it).
    pub async fn list_payments_json(
        &self,
        params: &PaymentListParams,
    ) -> Result<Page<serde_json::Value>, Error> {
        self.payments_page(params).await
    }

    async fn payments_page<T: DeserializeOwned>(
        &self,
        params: &PaymentListParams,
    ) -> Result<Page<T>, Error> {
        let mut url = self.url("v1/payments");
        url.query_pairs_mut().extend_pairs(params.pairs());
        Ok(self.read(url, true).await?.0)
    }

    /// `GET /v1/refunds`: one page of this shop's refunds, newest first.
    pub async fn list_refunds(&self, params: &ListParams) -> Result<Page<Refund>, Error> {
        let mut url = self.url("v1/refunds");
        url.query_pairs_mut().extend_pairs(params.pairs());
        Ok(self.read(url, true).await?.0)
    }

    /// `GET /v1/payments/{id}/refunds`: one page of a payment's refunds,
    /// newest first (`Rejected` with `not_found` when the payment is not
    /// this shop's).
    pub async fn payment_refunds(
        &self,
        payment_id: &str,
        params: &ListParams,
    ) -> Result<Page<Refund>, Error> {
        self.payment_refunds_page(payment_id, params).await
    }

    /// [`Client::payment_refunds`] with each refund as the JSON the server
    /// sent (for tools that print it, and tests that compare members the
    /// typed [`Refund`] does not keep).
    pub async fn payment_refunds_json(
        &self,
        payment_id: &str,
        params: &ListParams,
    ) -> Result<Page<serde_json::Value>, Error> {
        self.payment_refunds_page(payment_id, params).await
    }

    async fn payment_refunds_page<T: DeserializeOwned>(
        &self,
        payment_id: &str,
        params: &ListParams,
    ) -> Result<Page<T>, Error> {
        self.payment_list_page(payment_id, "refunds", params).await
    }

    /// `GET /v1/payments/{id}/captures`: one page of an authorized
    /// payment's captures, newest first (`Rejected` with `not_found` when
    /// the payment is not this shop's).
    pub async fn payment_captures(
        &self,
        payment_id: &str,
        params: &ListParams,
    ) -> Result<Page<Capture>, Error> {
        self.payment_list_page(payment_id, "captures", params).await
    }

    /// [`Client::payment_captures`] with each capture as the JSON the
    /// server sent.
    pub async fn payment_captures_json(
        &self,
        payment_id: &str,
        params: &ListParams,
    ) -> Result<Page<serde_json::Value>, Error> {
        self.payment_list_page(payment_id, "captures", params).await
    }

    /// One page of `/v1/payments/{payment_id}/{list}`.
    async fn payment_list_page<T: DeserializeOwned>(
        &self,
        payment_id: &str,
        list: &str,
        params: &ListParams,
    ) -> Result<Page<T>, Error> {
        let mut url = self.url("v1/payments/");
        if let Ok(mut segments) = url.path_segments_mut() {
            segments.pop_if_empty().push(payment_id).push(list);
        }
        url.query_pairs_mut().extend_pairs(params.pairs());
        Ok(self.read(url, true).await?.0)
    }

    /// `GET /v1/idempotency-keys/{key}`: what the service knows of one of
    /// this shop's keys (`Rejected` with `not_found` when it has none).
    pub async fn idempotency_key(&self, key: &str) -> Result<IdempotencyKeyInfo, Error> {
        let mut url = self.url("v1/idempotency-keys/");
        if let Ok(mut segments) = url.path_segments_mut() {
            segments.pop_if_empty().push(key);
        }
        Ok(self.read(url, true).await?.0)
    }
}
