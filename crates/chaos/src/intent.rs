//! The intents of a run: an order of one shop and what its client will do
//! (double clicks, changed bodies, refunds, cancels), drawn from the seed.

use std::collections::BTreeMap;

use chargeonce_client::{CreatePayment, IdempotencyKey, Money};
use chargeonce_core::Currency;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::args::ChaosArgs;
use crate::error::ChaosError;

/// The currency of every intent.
pub const CURRENCY: &str = "RUB";

/// A refund the intent makes once paid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RefundPlan {
    /// The first refund, in minor units.
    pub first_minor: i64,
    /// A second refund sent at the same time under another key, when set.
    pub second_minor: Option<i64>,
}

/// What an intent that only authorizes does with its authorization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthorizePlan {
    /// The captures, in minor units, each under its own key
    /// (`capture-1`, ...); together they may ask more than was authorized
    /// (the excess must be refused, never taken).
    pub parts: Vec<i64>,
    /// The captures are sent at once (through several instances).
    pub concurrent: bool,
    /// The last capture is `final` (the rest is released once it succeeds).
    pub last_final: bool,
    /// A void under its own key: after the captures, or racing them.
    pub void: Option<VoidPlan>,
}

/// When an intent voids its authorization.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VoidPlan {
    /// Once the captures ended.
    After,
    /// At the same time as the captures.
    Racing,
}

/// One payment intent: an order of one shop, and what the client will do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Intent {
    /// Its number.
    pub index: usize,
    /// The shop's index.
    pub shop: usize,
    /// The order reference (the same references exist in every shop).
    pub reference: String,
    /// The key: `for_operation(reference, "pay")`.
    pub key: IdempotencyKey,
    /// In minor units.
    pub amount_minor: i64,
    /// The card token (`tok_ok` or `tok_declined`).
    pub token: &'static str,
    /// Sent twice at once.
    pub double_click: bool,
    /// Repeated much later.
    pub late_retry: bool,
    /// Repeated with another amount under the same key.
    pub changed_body: bool,
    /// Refunded once paid.
    pub refund: Option<RefundPlan>,
    /// Canceled a moment after it is sent.
    pub cancel: bool,
    /// The metadata its payment request carries (every other intent, so
    /// payments with and without it mix); every answer about its payment
    /// must show exactly these pairs (`metadata-as-sent`).
    pub metadata: BTreeMap<String, String>,
    /// Only authorized, then captured, voided or left to expire.
    pub authorize: Option<AuthorizePlan>,
}

/// SplitMix64: a seed per intent, so an intent's choices do not depend on
/// the order in which clients pick intents up.
pub fn mix(seed: u64, n: u64) -> u64 {
    let mut z = seed.wrapping_add(n.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Intent {
    /// Intent `index` of a run with `seed`.
    pub fn generate(seed: u64, index: usize, args: &ChaosArgs) -> Result<Self, ChaosError> {
        let mut rng = StdRng::seed_from_u64(mix(seed, index as u64));
        let shops = args.shops.max(1);
        let shop = index % shops;
        let reference = format!("order-{}", index / shops);
        let key = IdempotencyKey::for_operation(&reference, "pay")
            .map_err(|e| ChaosError::Setup(format!("intent key: {e}")))?;
        let amount_minor = rng.random_range(100..=500_000_i64);
        let token = if rng.random_bool(args.decline_rate.clamp(0.0, 1.0)) {
            "tok_declined"
        } else {
            "tok_ok"
        };
        let double_click = rng.random_bool(args.double_click_rate.clamp(0.0, 1.0));
        let late_retry = rng.random_bool(args.late_retry_rate.clamp(0.0, 1.0));
        let changed_body = rng.random_bool(args.changed_body_rate.clamp(0.0, 1.0));
        let refund = rng.random_bool(args.refund_rate.clamp(0.0, 1.0)).then(|| {
            let first_minor = rng.random_range(1..=amount_minor);
            let second_minor = rng
                .random_bool(0.3)
                .then(|| rng.random_range(1..=amount_minor));
            RefundPlan {
                first_minor,
                second_minor,
            }
        });
        // Drawn last: the earlier draws (and so every run before the
        // flag) stay as they were for a seed.
        let cancel = rng.random_bool(args.cancel_rate.clamp(0.0, 1.0));
        // Not drawn: the run's other choices stay as they were for a seed.
        let metadata = if index.is_multiple_of(2) {
            BTreeMap::from([
                ("intent".to_owned(), index.to_string()),
                ("note".to_owned(), format!("заказ «{reference}»")),
            ])
        } else {
            BTreeMap::new()
        };
        // Drawn after every other choice, as the cancel: runs of a seed
        // from before stay as they were, with some intents authorizing.
        let authorize = rng
            .random_bool(args.authorize_rate.clamp(0.0, 1.0))
            .then(|| AuthorizePlan::generate(&mut rng, amount_minor));
        Ok(Self {
            authorize,
            index,
            shop,
            reference,
            key,
            amount_minor,
            token,
            double_click,
            late_retry,
            changed_body,
            refund,
            cancel,
            metadata,
        })
    }

    /// The payment request (an authorization when the intent has a plan
    /// for one).
    pub fn request(&self) -> Result<CreatePayment, ChaosError> {
        let mut request = CreatePayment::new(
            money(self.amount_minor)?,
            self.reference.clone(),
            self.token,
        );
        if self.authorize.is_some() {
            request = request.manual_capture();
        }
        Ok(self
            .metadata
            .iter()
            .fold(request, |request, (k, v)| request.with_metadata(k, v)))
    }
}

impl AuthorizePlan {
    /// A plan for an authorization of `amount_minor`: a quarter left alone
    /// (to expire), the rest captured in one to three parts that together
    /// ask up to a fifth more than was authorized, and voided a third of
    /// the time.
    fn generate(rng: &mut StdRng, amount_minor: i64) -> Self {
        if rng.random_bool(0.25) {
            return Self {
                parts: Vec::new(),
                concurrent: false,
                last_final: false,
                void: None,
            };
        }
        let n = rng.random_range(1..=3_i64);
        let asked = amount_minor + amount_minor * rng.random_range(-8..=2_i64) / 10;
        let share = (asked / n).max(1);
        let parts = (0..n).map(|_| rng.random_range(1..=share)).collect();
        let void = match rng.random_range(0..6) {
            0 => Some(VoidPlan::After),
            1 => Some(VoidPlan::Racing),
            _ => None,
        };
        Self {
            parts,
            concurrent: rng.random_bool(0.5),
            last_final: rng.random_bool(0.5),
            void,
        }
    }
}

pub(crate) fn money(minor: i64) -> Result<Money, ChaosError> {
    let currency = Currency::from_code(CURRENCY).map_err(|e| ChaosError::Setup(e.to_string()))?;
    Money::from_minor(minor, currency).map_err(|e| ChaosError::Setup(e.to_string()))
}
