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
