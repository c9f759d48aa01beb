//! The acquirer of each mode: a live shop's money goes to the acquirer
//! configured, a test mode's (`{shop}.test`, see [`ShopId`]) to a simulator,
//! so a test payment can never reach the live acquirer. The engine and the
//! workers pick the acquirer of a payment by the shop id it is stored under,
//! never by anything a request can choose.

use std::sync::Arc;

use async_trait::async_trait;

use crate::acquirer::{AcquirerRefund, RefundRequest};
use crate::api_key::Mode;
use crate::{
    Acquirer, AcquirerCharge, AcquirerError, AcquirerKey, ChargeRequest, PaymentId,
    RefundSettlement, ShopId,
};

/// The decline code of a test-mode charge where no test acquirer is wired
/// ([`Acquirers::live_only`]): refused, nothing sent anywhere.
pub const TEST_MODE_UNAVAILABLE: &str = "test_mode_unavailable";

/// The acquirer of live mode and the one of test mode.
#[derive(Clone)]
pub struct Acquirers {
    live: Arc<dyn Acquirer>,
    test: Arc<dyn Acquirer>,
}

impl Acquirers {
    /// `live` for live shops' money, `test` (a simulator) for test mode's.
    pub fn new(live: Arc<dyn Acquirer>, test: Arc<dyn Acquirer>) -> Self {
        Self { live, test }
    }

    /// `live` alone: test mode's charges and refunds are refused
    /// ([`TEST_MODE_UNAVAILABLE`]) and its look-ups find nothing; nothing of
    /// test mode reaches `live`.
    pub fn live_only(live: Arc<dyn Acquirer>) -> Self {
        Self::new(live, Arc::new(NoTestAcquirer))
    }

    /// The acquirer of `mode`.
    pub fn of_mode(&self, mode: Mode) -> &Arc<dyn Acquirer> {
        match mode {
            Mode::Live => &self.live,
            Mode::Test => &self.test,
        }
    }

    /// The acquirer of the mode `shop` names.
    pub fn of_shop(&self, shop: &ShopId) -> &Arc<dyn Acquirer> {
        self.of_mode(shop.mode())
    }
}

impl From<Arc<dyn Acquirer>> for Acquirers {
    /// [`Acquirers::live_only`].
    fn from(live: Arc<dyn Acquirer>) -> Self {
        Self::live_only(live)
    }
}

/// Test mode's acquirer where none is wired: refuses what would move money,
/// knows of nothing.
struct NoTestAcquirer;

fn unavailable() -> AcquirerError {
    AcquirerError::Rejected(TEST_MODE_UNAVAILABLE.to_owned())
}

#[async_trait]
impl Acquirer for NoTestAcquirer {
    async fn charge(&self, _: &ChargeRequest) -> Result<crate::ChargeResult, AcquirerError> {
        Err(unavailable())
    }

    async fn status(&self, _: &AcquirerKey) -> Result<Option<AcquirerCharge>, AcquirerError> {
        Ok(None)
    }

    async fn charges_for_payment(
        &self,
        _: &ShopId,
        _: &PaymentId,
    ) -> Result<Vec<AcquirerCharge>, AcquirerError> {
        Ok(Vec::new())
    }

    async fn refund_payment(&self, _: &RefundRequest) -> Result<RefundSettlement, AcquirerError> {
        Err(unavailable())
    }

    async fn refunds_for_refund(
        &self,
        _: &RefundRequest,
    ) -> Result<Vec<AcquirerRefund>, AcquirerError> {
        Ok(Vec::new())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::{CaptureMethod, CardToken, Money, Reference};

    /// Live mode's acquirer in these tests: it must never be reached.
    struct Unreachable;

    #[async_trait]
    impl Acquirer for Unreachable {
        async fn charge(&self, _: &ChargeRequest) -> Result<crate::ChargeResult, AcquirerError> {
            panic!("a test-mode charge reached live mode's acquirer")
        }
        async fn status(&self, _: &AcquirerKey) -> Result<Option<AcquirerCharge>, AcquirerError> {
            panic!("a test-mode look-up reached live mode's acquirer")
        }
        async fn charges_for_payment(
            &self,
            _: &ShopId,
            _: &PaymentId,
        ) -> Result<Vec<AcquirerCharge>, AcquirerError> {
            panic!("a test-mode look-up reached live mode's acquirer")
        }
        async fn refund_payment(
            &self,
            _: &RefundRequest,
        ) -> Result<RefundSettlement, AcquirerError> {
            panic!("a test-mode refund reached live mode's acquirer")
        }
        async fn refunds_for_refund(
            &self,
            _: &RefundRequest,
        ) -> Result<Vec<AcquirerRefund>, AcquirerError> {
            panic!("a test-mode look-up reached live mode's acquirer")
        }
    }

    /// Without a test acquirer, test mode's charges are refused for good
    /// (nothing moved, the payment declined) and its look-ups find nothing;
    /// live mode's acquirer is never asked.
    #[tokio::test]
    async fn live_only_refuses_test_mode_without_reaching_live() {
        let acquirers = Acquirers::live_only(Arc::new(Unreachable));
        let shop = ShopId::new("shop").unwrap().in_mode(Mode::Test);
        let test = acquirers.of_shop(&shop);
        let payment_id = PaymentId::generate();
        let request = ChargeRequest {
            acquirer_key: AcquirerKey::for_payment(&payment_id),
            shop_id: shop.clone(),
            payment_id: payment_id.clone(),
            reference: Reference::new("order-1").unwrap(),
            amount: Money::parse("15.00", "RUB").unwrap(),
            token: CardToken::new("tok_ok").unwrap(),
            capture_method: CaptureMethod::Automatic,
        };
        match test.charge(&request).await {
            Err(AcquirerError::Rejected(code)) => assert_eq!(code, TEST_MODE_UNAVAILABLE),
            other => panic!("{other:?}"),
        }
        assert!(test.status(&request.acquirer_key).await.unwrap().is_none());
        assert!(
            test.charges_for_payment(&shop, &payment_id)
                .await
                .unwrap()
                .is_empty()
        );
        // Live mode's shop gets live mode's acquirer.
        let live = ShopId::new("shop").unwrap();
        assert!(Arc::ptr_eq(
            acquirers.of_shop(&live),
            acquirers.of_mode(Mode::Live)
        ));
        assert!(!Arc::ptr_eq(
            acquirers.of_shop(&shop),
            acquirers.of_mode(Mode::Live)
        ));
    }
}
