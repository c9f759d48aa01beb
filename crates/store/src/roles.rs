//! The role traits of `chargeonce_core::store`, implemented for a driver by
//! one macro, so the map from each role method to the concern file that
//! carries it out is written once for both drivers: `postgres/` and
//! `sqlite/` must have the same files with the same function names
//! (`claim::take_over`, `refunds::claim_refund`, ...), or one of them does
//! not compile.

/// Implements every role trait for `$store` by calling the function of the
/// same name in the concern module of the invoking driver (`cancel`, `claim`, `keys`,
/// `finish`, `refunds`, `payments`, `reconciliation`, `events`, `outbox`,
/// `shops`, `health`, `history`, `findings`, `operator`), each taking the
/// store first.
macro_rules! impl_roles {
    ($store:ty) => {
        const _: () = {
            use std::time::Duration;

            use async_trait::async_trait;
            use chargeonce_core::events::{
                AttemptOutcome, DueEvent, Event, EventId, EventQuery, WebhookEndpoint,
            };
            use chargeonce_core::findings::{
                Finding, FindingId, FindingQuery, NewFinding, Resolution,
            };
            use chargeonce_core::history::{AcquirerAttempt, HistoryEntry, RepeatTally};
            use chargeonce_core::store::{
                Findings, Health, History, KeyRepeats, Keys, Operator, Outbox, Payments,
                Reconciliation, Refunds, ShopSummary, Shops, StoreCounts,
            };
            use chargeonce_core::{
                Acquired, AcquirerKey, CancelClaim, Claim, ClaimRequest, EventRecorded,
                Fingerprint, FinishOutcome, IdempotencyKey, InboundEvent, KeyInfo, KeyRecord,
                KeyTiming, Lease, NewPayment, NewRefund, Page, PageRequest, Payment, PaymentFilter,
                PaymentId, Reference, Refund, RefundClaim, RefundId, RefundSettlement, SecretHash,
                SettleOutcome, Settlement, ShopId, StalledKey, StoreError, StoredResponse,
            };
            use time::OffsetDateTime;

            #[async_trait]
            impl Keys for $store {
                async fn claim_payment(
                    &self,
                    claim: &ClaimRequest,
                    payment: &NewPayment,
                    timing: KeyTiming,
                ) -> Result<Claim, StoreError> {
                    claim::claim_payment(self, claim, payment, timing).await
                }

                async fn take_over(
                    &self,
                    shop_id: &ShopId,
                    key: &IdempotencyKey,
                    fingerprint: &Fingerprint,
                    lease: Duration,
                ) -> Result<Option<Acquired>, StoreError> {
                    claim::take_over(self, shop_id, key, fingerprint, lease).await
                }

                async fn renew_lease(
                    &self,
                    lease: &Lease,
                    duration: Duration,
                ) -> Result<bool, StoreError> {
                    claim::renew_lease(self, lease, duration).await
                }

                async fn release_lease(
                    &self,
                    lease: &Lease,
                    attempts: &[AcquirerAttempt],
                ) -> Result<bool, StoreError> {
                    claim::release_lease(self, lease, attempts).await
                }

                async fn park_lease(
                    &self,
                    lease: &Lease,
                    hold: Duration,
                    attempts: &[AcquirerAttempt],
                ) -> Result<bool, StoreError> {
                    claim::park_lease(self, lease, hold, attempts).await
                }

                async fn record_lost_lease_calls(
                    &self,
                    lease: &Lease,
                    attempts: &[AcquirerAttempt],
                ) -> Result<(), StoreError> {
                    claim::record_lost_lease_calls(self, lease, attempts).await
                }

                async fn abandon_key(&self, lease: &Lease) -> Result<bool, StoreError> {
                    claim::abandon_key(self, lease).await
                }

                async fn claim_cancel(
                    &self,
                    claim: &ClaimRequest,
                    payment_id: &PaymentId,
                    timing: KeyTiming,
                ) -> Result<CancelClaim, StoreError> {
                    cancel::claim_cancel(self, claim, payment_id, timing).await
                }

                async fn request_cancel(
                    &self,
                    shop_id: &ShopId,
                    payment_id: &PaymentId,
                    key: Option<&IdempotencyKey>,
                ) -> Result<Option<Payment>, StoreError> {
                    cancel::request_cancel(self, shop_id, payment_id, key).await
                }

                async fn finish(
                    &self,
                    lease: &Lease,
                    settlement: Option<(&Payment, &Settlement)>,
                    response: &StoredResponse,
                    ttl: Duration,
                    attempts: &[AcquirerAttempt],
                ) -> Result<FinishOutcome, StoreError> {
                    finish::finish(self, lease, settlement, response, ttl, attempts).await
                }

                async fn key(
                    &self,
                    shop_id: &ShopId,
                    key: &IdempotencyKey,
                ) -> Result<Option<KeyRecord>, StoreError> {
                    keys::key(self, shop_id, key).await
                }

                async fn key_info(
                    &self,
                    shop_id: &ShopId,
                    key: &IdempotencyKey,
                ) -> Result<Option<KeyInfo>, StoreError> {
                    keys::key_info(self, shop_id, key).await
                }

                async fn sweep_expired_keys(&self, batch: u32) -> Result<u64, StoreError> {
                    keys::sweep_expired_keys(self, batch).await
                }

                async fn stalled_keys(
                    &self,
                    idle: Duration,
                    limit: u32,
                ) -> Result<Vec<StalledKey>, StoreError> {
                    keys::stalled_keys(self, idle, limit).await
                }
            }

            #[async_trait]
            impl Refunds for $store {
                async fn claim_refund(
                    &self,
                    claim: &ClaimRequest,
                    refund: &NewRefund,
                    timing: KeyTiming,
                ) -> Result<RefundClaim, StoreError> {
                    refunds::claim_refund(self, claim, refund, timing).await
                }

                async fn finish_refund(
                    &self,
                    lease: &Lease,
                    settlement: Option<(&RefundId, &RefundSettlement)>,
                    response: &StoredResponse,
                    ttl: Duration,
                    attempts: &[AcquirerAttempt],
                ) -> Result<FinishOutcome, StoreError> {
                    refunds::finish_refund(self, lease, settlement, response, ttl, attempts).await
                }

                async fn refund(
                    &self,
                    shop_id: &ShopId,
                    id: &RefundId,
                ) -> Result<Option<Refund>, StoreError> {
                    refunds::refund(self, shop_id, id).await
                }

                async fn list_refunds(
                    &self,
                    shop_id: &ShopId,
                    payment_id: Option<&PaymentId>,
                    page: &PageRequest<RefundId>,
                ) -> Result<Page<Refund>, StoreError> {
                    refunds::list_refunds(self, shop_id, payment_id, page).await
                }
            }

            #[async_trait]
            impl Payments for $store {
                async fn payment(
                    &self,
                    shop_id: &ShopId,
                    id: &PaymentId,
                ) -> Result<Option<Payment>, StoreError> {
                    payments::payment(self, shop_id, id).await
                }

                async fn payments_by_reference(
                    &self,
                    shop_id: &ShopId,
                    reference: &Reference,
                ) -> Result<Vec<Payment>, StoreError> {
                    payments::payments_by_reference(self, shop_id, reference).await
                }

                async fn list_payments(
                    &self,
                    shop_id: &ShopId,
                    filter: &PaymentFilter,
                    page: &PageRequest<PaymentId>,
                ) -> Result<Page<Payment>, StoreError> {
                    payments::list_payments(self, shop_id, filter, page).await
                }
            }

            #[async_trait]
            impl Reconciliation for $store {
                async fn pending_payments(
                    &self,
                    older_than: Duration,
                    limit: u32,
                ) -> Result<Vec<Payment>, StoreError> {
                    reconciliation::pending_payments(self, older_than, limit).await
                }

                async fn payments_created_between(
                    &self,
                    from: OffsetDateTime,
                    to: OffsetDateTime,
                    after: Option<&PaymentId>,
                    limit: u32,
                ) -> Result<Vec<Payment>, StoreError> {
                    reconciliation::payments_created_between(self, from, to, after, limit).await
                }

                async fn payment_by_acquirer_key(
                    &self,
                    key: &AcquirerKey,
                ) -> Result<Option<Payment>, StoreError> {
                    reconciliation::payment_by_acquirer_key(self, key).await
                }

                async fn settle_payment(
                    &self,
                    shop_id: &ShopId,
                    id: &PaymentId,
                    settlement: &Settlement,
                ) -> Result<SettleOutcome, StoreError> {
                    events::settle_payment(self, shop_id, id, settlement).await
                }

                async fn record_event(
                    &self,
                    event: &InboundEvent,
                ) -> Result<EventRecorded, StoreError> {
                    events::record_event(self, event).await
                }
            }

            #[async_trait]
            impl Outbox for $store {
                async fn events(
                    &self,
                    shop_id: &ShopId,
                    query: &EventQuery,
                ) -> Result<Vec<Event>, StoreError> {
                    outbox::events(self, shop_id, query).await
                }

                async fn event(
                    &self,
                    shop_id: &ShopId,
                    id: &EventId,
                ) -> Result<Option<Event>, StoreError> {
                    outbox::event(self, shop_id, id).await
                }

                async fn resend_event(
                    &self,
                    shop_id: &ShopId,
                    id: &EventId,
                ) -> Result<Option<Event>, StoreError> {
                    outbox::resend_event(self, shop_id, id).await
                }

                async fn claim_due_events(
                    &self,
                    limit: u32,
                    lease: Duration,
                ) -> Result<Vec<DueEvent>, StoreError> {
                    outbox::claim_due_events(self, limit, lease).await
                }

                async fn record_attempt(
                    &self,
                    id: &EventId,
                    outcome: &AttemptOutcome,
                ) -> Result<(), StoreError> {
                    outbox::record_attempt(self, id, outcome).await
                }
            }

            #[async_trait]
            impl Shops for $store {
                async fn add_shop(
                    &self,
                    shop_id: &ShopId,
                    secret: &SecretHash,
                ) -> Result<(), StoreError> {
                    shops::add_shop(self, shop_id, secret).await
                }

                async fn shop_secret(
                    &self,
                    shop_id: &ShopId,
                ) -> Result<Option<SecretHash>, StoreError> {
                    shops::shop_secret(self, shop_id).await
                }

                async fn set_webhook(
                    &self,
                    shop_id: &ShopId,
                    endpoint: Option<&WebhookEndpoint>,
                ) -> Result<bool, StoreError> {
                    shops::set_webhook(self, shop_id, endpoint).await
                }
            }

            #[async_trait]
            impl Health for $store {
                async fn ping(&self) -> Result<(), StoreError> {
                    health::ping(self).await
                }
            }

            #[async_trait]
            impl History for $store {
                async fn payment_history(
                    &self,
                    shop_id: Option<&ShopId>,
                    payment_id: &PaymentId,
                ) -> Result<Vec<HistoryEntry>, StoreError> {
                    history::payment_history(self, shop_id, payment_id).await
                }

                async fn key_repeats(
                    &self,
                    shop_id: &ShopId,
                    keys: &[IdempotencyKey],
                ) -> Result<Vec<KeyRepeats>, StoreError> {
                    history::key_repeats(self, shop_id, keys).await
                }

                async fn add_repeats(&self, tallies: &[RepeatTally]) -> Result<(), StoreError> {
                    history::add_repeats(self, tallies).await
                }
            }

            #[async_trait]
            impl Findings for $store {
                async fn record_findings(
                    &self,
                    found: &[NewFinding],
                ) -> Result<Vec<FindingId>, StoreError> {
                    findings::record_findings(self, found).await
                }

                async fn findings(&self, query: &FindingQuery) -> Result<Vec<Finding>, StoreError> {
                    findings::findings(self, query).await
                }

                async fn finding(&self, id: FindingId) -> Result<Option<Finding>, StoreError> {
                    findings::finding(self, id).await
                }

                async fn resolve_finding(
                    &self,
                    id: FindingId,
                    resolution: &Resolution,
                ) -> Result<Option<Finding>, StoreError> {
                    findings::resolve_finding(self, id, resolution).await
                }
            }

            #[async_trait]
            impl Operator for $store {
                async fn operator_secret(&self) -> Result<Option<SecretHash>, StoreError> {
                    operator::operator_secret(self).await
                }

                async fn init_operator_secret(
                    &self,
                    hash: &SecretHash,
                ) -> Result<bool, StoreError> {
                    operator::init_operator_secret(self, hash).await
                }

                async fn set_operator_secret(&self, hash: &SecretHash) -> Result<(), StoreError> {
                    operator::set_operator_secret(self, hash).await
                }

                async fn all_payments(
                    &self,
                    shop_id: Option<&ShopId>,
                    filter: &PaymentFilter,
                    page: &PageRequest<PaymentId>,
                ) -> Result<Page<Payment>, StoreError> {
                    operator::all_payments(self, shop_id, filter, page).await
                }

                async fn any_payment(&self, id: &PaymentId) -> Result<Option<Payment>, StoreError> {
                    operator::any_payment(self, id).await
                }

                async fn payment_events(&self, id: &PaymentId) -> Result<Vec<Event>, StoreError> {
                    operator::payment_events(self, id).await
                }

                async fn event_shop(&self, id: &EventId) -> Result<Option<ShopId>, StoreError> {
                    operator::event_shop(self, id).await
                }

                async fn shops(&self) -> Result<Vec<ShopSummary>, StoreError> {
                    operator::shops(self).await
                }

                async fn counts(&self) -> Result<StoreCounts, StoreError> {
                    operator::counts(self).await
                }
            }
        };
    };
}

pub(crate) use impl_roles;
