//! The API's requests and resources, typed.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use chargeonce_core::authorization::AuthorizationStatus;
use chargeonce_core::{CaptureMethod, CaptureStatus, Money, MoneyError, PaymentStatus};
use chargeonce_wire as wire;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// The body of `POST /v1/payments`: how much, for which order, with which
/// payment method.
///
/// ```
/// use chargeonce_client::CreatePayment;
/// use chargeonce_core::Money;
///
/// let request = CreatePayment::new(Money::parse("1500.00", "RUB").unwrap(), "order-123", "tok_ok");
/// assert_eq!(
///     request.to_json().to_string(),
///     r#"{"amount":{"currency":"RUB","value":"1500.00"},"payment_method":{"token":"tok_ok"},"reference":"order-123"}"#
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatePayment {
    /// How much, in which currency.
    pub amount: Money,
    /// The shop's order. One order gets at most one successful payment.
    pub reference: String,
    /// The acquirer's payment method token (simulator tokens: `tok_ok`,
    /// `tok_declined`, `tok_timeout`, `tok_slow`, ...).
    pub token: String,
    /// The shop's own pairs (at most 50, keys of 1 to 40 characters, values
    /// of at most 500), returned on the payment; `None` sends none.
    pub metadata: Option<BTreeMap<String, String>>,
    /// Charge at once (the default) or only authorize
    /// ([`CaptureMethod::Manual`]: capture later, or void).
    pub capture_method: CaptureMethod,
}

impl CreatePayment {
    /// Whether `payment` is this request's: the same order, amount and
    /// currency. Only then is it paid (or declined) for this request.
    pub fn is_answered_by(&self, payment: &Payment) -> bool {
        payment.reference == self.reference && payment.amount == self.amount
    }

    /// A payment request.
    pub fn new(amount: Money, reference: impl Into<String>, token: impl Into<String>) -> Self {
        Self {
            amount,
            reference: reference.into(),
            token: token.into(),
            metadata: None,
            capture_method: CaptureMethod::Automatic,
        }
    }

    /// The request only authorizes: the amount is held for captures
    /// ([`Client::capture`](crate::Client::capture)) or a void.
    ///
    /// ```
    /// use chargeonce_client::CreatePayment;
    /// use chargeonce_core::Money;
    ///
    /// let request = CreatePayment::new(Money::parse("1500.00", "RUB").unwrap(), "order-1", "tok_ok")
    ///     .manual_capture();
    /// assert_eq!(request.to_json()["capture_method"], "manual");
    /// ```
    pub fn manual_capture(mut self) -> Self {
        self.capture_method = CaptureMethod::Manual;
        self
    }

    /// The request with one more metadata pair.
    ///
    /// ```
    /// use chargeonce_client::CreatePayment;
    /// use chargeonce_core::Money;
    ///
    /// let request = CreatePayment::new(Money::parse("1.00", "RUB").unwrap(), "order-1", "tok_ok")
    ///     .with_metadata("customer", "cus_42");
    /// assert_eq!(request.to_json()["metadata"]["customer"], "cus_42");
    /// ```
    pub fn with_metadata(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.metadata
            .get_or_insert_with(BTreeMap::new)
            .insert(key.into(), value.into());
        self
    }

    /// The JSON body, as sent. The client serialises it once per call and
    /// sends the same bytes on every attempt.
    pub fn to_json(&self) -> Value {
        let body = wire::CreatePayment {
            amount: amount(self.amount),
            reference: self.reference.clone(),
            payment_method: wire::PaymentMethod {
                token: self.token.clone(),
            },
            metadata: self.metadata.clone(),
            // Only sent when manual: an automatic request is the same
            // bytes as before capture methods existed.
            capture_method: match self.capture_method {
                CaptureMethod::Automatic => None,
                CaptureMethod::Manual => Some(wire::CaptureMethod::Manual),
            },
        };
        // Serialising strings into a `Value` cannot fail.
        serde_json::to_value(body).unwrap_or_default()
    }
}

/// The wire amount of a `Money`: exactly the currency's minor units.
fn amount(money: Money) -> wire::Amount {
    wire::Amount::new(money.to_decimal_string(), money.currency().code())
}

/// An amount in an answer, read leniently (a trailing zero past the
/// currency's minor units is the same amount). What the client sends is
/// built from a `Money`, always with exactly the minor units.
fn money(amount: &wire::Amount) -> Result<Money, String> {
    Money::parse_lenient(&amount.value, &amount.currency).map_err(|e| e.to_string())
}

/// An amount that may be zero, in minor units (`"0.00"` is 0).
fn minor_or_zero(amount: &wire::Amount) -> Result<i64, String> {
    match Money::parse_lenient(&amount.value, &amount.currency) {
        Ok(money) => Ok(money.minor_units()),
        Err(MoneyError::NotPositive) => Ok(0),
        Err(error) => Err(error.to_string()),
    }
}

/// A payment, as the API shows it (read from a [`wire::Payment`]).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(try_from = "wire::Payment")]
pub struct Payment {
    /// Our id (`pay_...`).
    pub id: String,
    /// `true` for live mode (real money, the acquirer), `false` for test
    /// mode (a test key's, the simulator's). `true` when the answer has no
    /// `livemode` (stored before test mode existed: live).
    pub livemode: bool,
    /// The owning shop (its own id in either mode).
    pub shop_id: String,
    /// What the charge (or the authorization) did: `pending`, `succeeded`,
    /// `declined` or `canceled`. An authorization that succeeded is
    /// `succeeded` here; where its hold stands is
    /// [`Payment::authorization_status`].
    pub status: PaymentStatus,
    /// How much.
    pub amount: Money,
    /// The shop's order.
    pub reference: String,
    /// The acquirer's id of the charge, once known.
    pub provider_payment_id: Option<String>,
    /// Why the acquirer declined, when it did.
    pub decline_code: Option<String>,
    /// When it was created.
    pub created_at: OffsetDateTime,
    /// How much of it refunds gave back, in minor units of its currency
    /// (0 until a refund succeeds).
    pub refunded_minor: i64,
    /// The shop's own pairs, as its request gave them.
    pub metadata: BTreeMap<String, String>,
    /// Charged at once, or only authorized.
    pub capture_method: CaptureMethod,
    /// Where an authorization that succeeded stands (`authorized`,
    /// `partially_captured`, `succeeded`, `voided`, `expired`); `None` for
    /// a payment charged at once, or not authorized.
    pub authorization_status: Option<AuthorizationStatus>,
    /// What captures may still take, in minor units (0 when charged at once).
    pub capturable_minor: i64,
    /// What was taken, in minor units.
    pub captured_minor: i64,
    /// When an authorization is released unless captured.
    pub authorization_expires_at: Option<OffsetDateTime>,
}

impl TryFrom<wire::Payment> for Payment {
    type Error = String;

    fn try_from(payment: wire::Payment) -> Result<Self, String> {
        let capture_method = match payment.capture_method {
            wire::CaptureMethod::Automatic => CaptureMethod::Automatic,
            wire::CaptureMethod::Manual => CaptureMethod::Manual,
        };
        let (status, held) = match payment.status {
            wire::PaymentStatus::Pending => (PaymentStatus::Pending, None),
            wire::PaymentStatus::Succeeded => (
                PaymentStatus::Succeeded,
                Some(AuthorizationStatus::Succeeded),
            ),
            wire::PaymentStatus::Declined => (PaymentStatus::Declined, None),
            wire::PaymentStatus::Canceled => (PaymentStatus::Canceled, None),
            wire::PaymentStatus::Authorized => (
                PaymentStatus::Succeeded,
                Some(AuthorizationStatus::Authorized),
            ),
            wire::PaymentStatus::PartiallyCaptured => (
                PaymentStatus::Succeeded,
                Some(AuthorizationStatus::PartiallyCaptured),
            ),
            wire::PaymentStatus::Voided => {
                (PaymentStatus::Succeeded, Some(AuthorizationStatus::Voided))
            }
            wire::PaymentStatus::Expired => {
                (PaymentStatus::Succeeded, Some(AuthorizationStatus::Expired))
            }
        };
        let authorization_status = held.filter(|_| capture_method == CaptureMethod::Manual);
        let optional_minor = |amount: &Option<wire::Amount>| match amount {
            Some(amount) => minor_or_zero(amount),
            None => Ok(0),
        };
        Ok(Self {
            status,
            capture_method,
            authorization_status,
            capturable_minor: optional_minor(&payment.amount_capturable)?,
            captured_minor: optional_minor(&payment.amount_captured)?,
            authorization_expires_at: payment
                .authorization_expires_at
                .as_deref()
                .map(|at| OffsetDateTime::parse(at, &Rfc3339))
                .transpose()
                .map_err(|e| format!("authorization_expires_at: {e}"))?,
            amount: money(&payment.amount)?,
            refunded_minor: minor_or_zero(&payment.amount_refunded)?,
            created_at: OffsetDateTime::parse(&payment.created_at, &Rfc3339)
                .map_err(|e| format!("created_at: {e}"))?,
            id: payment.id,
            livemode: payment.livemode,
            shop_id: payment.shop_id,
            reference: payment.reference,
            provider_payment_id: payment.provider_payment_id,
            decline_code: payment.decline_code,
            metadata: payment.metadata,
        })
    }
}

/// A refund request: `{}` refunds what is left of the payment, an amount
/// refunds part of it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CreateRefund {
    /// How much; `None` refunds what is left.
    pub amount: Option<Money>,
}

impl CreateRefund {
    /// Refunds what is left of the payment.
    pub fn full() -> Self {
        Self { amount: None }
    }

    /// Refunds `amount` of the payment.
    pub fn partial(amount: Money) -> Self {
        Self {
            amount: Some(amount),
        }
    }

    /// The JSON body.
    pub fn to_json(&self) -> Value {
        let body = wire::CreateRefund {
            amount: self.amount.map(amount),
        };
        // Serialising strings into a `Value` cannot fail.
        serde_json::to_value(body).unwrap_or_default()
    }
}

/// A refund, as the API shows it (read from a [`wire::Refund`]).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(try_from = "wire::Refund")]
pub struct Refund {
    /// Our id (`re_...`).
    pub id: String,
    /// `true` for live mode (real money, the acquirer), `false` for test
    /// mode (a test key's, the simulator's). `true` when the answer has no
    /// `livemode` (stored before test mode existed: live).
    pub livemode: bool,
    /// The refunded payment.
    pub payment_id: String,
    /// The owning shop.
    pub shop_id: String,
    /// `pending`, `succeeded` or `failed`.
    pub status: String,
    /// How much.
    pub amount: Money,
    /// The acquirer's id of the refund, once known.
    pub provider_refund_id: Option<String>,
    /// Why the acquirer refused, when it did.
    pub failure_code: Option<String>,
}

impl TryFrom<wire::Refund> for Refund {
    type Error = String;

    fn try_from(refund: wire::Refund) -> Result<Self, String> {
        Ok(Self {
            status: match refund.status {
                wire::RefundStatus::Pending => "pending",
                wire::RefundStatus::Succeeded => "succeeded",
                wire::RefundStatus::Failed => "failed",
            }
            .to_owned(),
            amount: money(&refund.amount)?,
            id: refund.id,
            livemode: refund.livemode,
            payment_id: refund.payment_id,
            shop_id: refund.shop_id,
            provider_refund_id: refund.provider_refund_id,
            failure_code: refund.failure_code,
        })
    }
}

/// A capture request: `{}` captures all that is capturable as the final
/// capture, an amount captures that much (more may follow unless final).
///
/// ```
/// use chargeonce_client::CreateCapture;
/// use chargeonce_core::Money;
///
/// assert_eq!(CreateCapture::rest().to_json().to_string(), "{}");
/// let part = CreateCapture::part(Money::parse("1000.00", "RUB").unwrap());
/// assert_eq!(
///     part.to_json().to_string(),
///     r#"{"amount":{"currency":"RUB","value":"1000.00"}}"#
/// );
/// assert_eq!(part.last().to_json()["final"], true);
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CreateCapture {
    /// How much; `None` captures all that is capturable, as the last capture.
    pub amount: Option<Money>,
    /// Sent as `final` when set.
    pub last: Option<bool>,
}

impl CreateCapture {
    /// Captures all that is capturable, as the last capture.
    pub fn rest() -> Self {
        Self::default()
    }

    /// Captures `amount`; more captures may follow.
    pub fn part(amount: Money) -> Self {
        Self {
            amount: Some(amount),
            last: None,
        }
    }

    /// The same capture as the last one: the rest is released once it
    /// succeeds.
    pub fn last(mut self) -> Self {
        self.last = Some(true);
        self
    }

    /// The JSON body.
    pub fn to_json(&self) -> Value {
        let body = wire::CreateCapture {
            amount: self.amount.map(amount),
            last: self.last,
        };
        // Serialising strings into a `Value` cannot fail.
        serde_json::to_value(body).unwrap_or_default()
    }
}

/// A capture, as the API shows it (read from a [`wire::Capture`]).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(try_from = "wire::Capture")]
pub struct Capture {
    /// Our id (`cap_...`).
    pub id: String,
    /// `true` for live mode (real money, the acquirer), `false` for test
    /// mode (a test key's, the simulator's). `true` when the answer has no
    /// `livemode` (stored before test mode existed: live).
    pub livemode: bool,
    /// The captured payment.
    pub payment_id: String,
    /// The owning shop.
    pub shop_id: String,
    /// Where it stands.
    pub status: CaptureStatus,
    /// How much.
    pub amount: Money,
    /// Whether it is the last capture.
    pub last: bool,
    /// The acquirer's id of the capture, once known.
    pub provider_capture_id: Option<String>,
    /// Why the acquirer refused, when it did.
    pub failure_code: Option<String>,
}

impl TryFrom<wire::Capture> for Capture {
    type Error = String;

    fn try_from(capture: wire::Capture) -> Result<Self, String> {
        Ok(Self {
            status: match capture.status {
                wire::CaptureStatus::Pending => CaptureStatus::Pending,
                wire::CaptureStatus::Succeeded => CaptureStatus::Succeeded,
                wire::CaptureStatus::Failed => CaptureStatus::Failed,
            },
            amount: money(&capture.amount)?,
            id: capture.id,
            livemode: capture.livemode,
            payment_id: capture.payment_id,
            shop_id: capture.shop_id,
            last: capture.last,
            provider_capture_id: capture.provider_capture_id,
            failure_code: capture.failure_code,
        })
    }
}

/// `GET /v1/payments?reference=`: an order's payments (newest first on the
/// wire; [`Client::payments_for`](crate::Client::payments_for) turns them
/// around).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(from = "wire::List<Payment>")]
pub struct PaymentList {
    /// The payments.
    pub data: Vec<Payment>,
}

impl From<wire::List<Payment>> for PaymentList {
    fn from(list: wire::List<Payment>) -> Self {
        Self { data: list.data }
    }
}

/// The embedded acquirer simulator's ledger (`GET /sim/ledger`, a test tool):
/// what really moved, according to the "bank".
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Ledger {
    /// Every charge attempt, oldest first.
    pub charges: Vec<LedgerCharge>,
    /// Succeeded charges summed per currency.
    pub total_succeeded: Vec<LedgerTotal>,
}

/// One charge attempt at the acquirer.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct LedgerCharge {
    /// The acquirer's id of the charge (`ch_...`): the payment's `provider_payment_id`.
    pub id: String,
    /// The key chargeonce sent to the acquirer (derived from the payment).
    pub acquirer_key: String,
    /// The shop.
    pub shop_id: String,
    /// Our payment id.
    pub payment_id: String,
    /// The order.
    pub reference: String,
    /// How much.
    #[serde(deserialize_with = "ledger_money")]
    pub amount: Money,
    /// `succeeded` or `declined`.
    pub status: String,
    /// Why it was declined.
    pub decline_code: Option<String>,
    /// When the acquirer recorded it.
    pub created_at: String,
}

/// An amount of the simulator's ledger: `{"value", "currency"}` as on the
/// API, read leniently.
fn ledger_money<'de, D: Deserializer<'de>>(d: D) -> Result<Money, D::Error> {
    #[derive(Deserialize)]
    struct AmountJson {
        value: String,
        currency: String,
    }
    let a = AmountJson::deserialize(d)?;
    Money::parse_lenient(&a.value, &a.currency).map_err(D::Error::custom)
}

/// The money that moved in one currency.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct LedgerTotal {
    /// ISO 4217 code.
    pub currency: String,
    /// The sum, as a decimal string.
    pub amount: String,
    /// How many succeeded charges.
    pub count: u64,
}

/// What an API key may do (read from the wire's `scope`): `full` (keys
/// included), `read_only` (every read, no POST) or `payments` (money moves
/// and reading back what they made).
pub use chargeonce_core::api_key::Scope as ApiKeyScope;

/// Whether an API key works now (read from the wire's `state`): `active`,
/// `expired` or `revoked`.
pub use chargeonce_core::api_key::KeyState as ApiKeyState;

/// A shop's API key, as `/v1/api-keys` shows it (read from a
/// [`wire::ApiKey`]).
///
/// Its [`secret`](ApiKey::secret) is there only in the answer to the
/// request that made the key ([`Client::create_api_key`](crate::Client::create_api_key),
/// [`Client::roll_api_key`](crate::Client::roll_api_key)): the service keeps
/// only its hash. A repeat of that request under the same idempotency key
/// answers the same key without it ([`ApiKey::replayed`]). `Debug` does not
/// show the secret.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "wire::ApiKey")]
pub struct ApiKey {
    /// Its id (`key_` and 32 hex digits).
    pub id: String,
    /// `true` for a live key.
    pub livemode: bool,
    /// What it may do.
    pub scope: ApiKeyScope,
    /// The visible start of its secret (`sk_live_4f3a`); `None` for a
    /// shop's first secret.
    pub prefix: Option<String>,
    /// What it is for.
    pub description: Option<String>,
    /// Whether it works now.
    pub state: ApiKeyState,
    /// When it was made.
    pub created_at: OffsetDateTime,
    /// When it stops working, if ever.
    pub expires_at: Option<OffsetDateTime>,
    /// When it was revoked, if it was.
    pub revoked_at: Option<OffsetDateTime>,
    /// When it last authenticated a request (to the minute), if ever.
    pub last_used_at: Option<OffsetDateTime>,
    /// The secret, in the answer that made the key only; `None` everywhere
    /// else, a replay included. Keep it now: it is never shown again.
    pub secret: Option<String>,
    /// Not a wire member: whether the answer was a replay of the
    /// idempotency key's first request (`Idempotent-Replayed: true`), which
    /// made nothing and carries no secret.
    pub replayed: bool,
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiKey")
            .field("id", &self.id)
            .field("livemode", &self.livemode)
            .field("scope", &self.scope)
            .field("prefix", &self.prefix)
            .field("description", &self.description)
            .field("state", &self.state)
            .field("created_at", &self.created_at)
            .field("expires_at", &self.expires_at)
            .field("revoked_at", &self.revoked_at)
            .field("last_used_at", &self.last_used_at)
            .field("secret", &self.secret.as_ref().map(|_| "***"))
            .field("replayed", &self.replayed)
            .finish()
    }
}

/// An optional RFC 3339 time of an answer.
fn optional_time(at: Option<&str>, name: &str) -> Result<Option<OffsetDateTime>, String> {
    at.map(|at| OffsetDateTime::parse(at, &Rfc3339))
        .transpose()
        .map_err(|e| format!("{name}: {e}"))
}

impl TryFrom<wire::ApiKey> for ApiKey {
    type Error = String;

    fn try_from(key: wire::ApiKey) -> Result<Self, String> {
        Ok(Self {
            scope: match key.scope {
                wire::ApiKeyScope::Full => ApiKeyScope::Full,
                wire::ApiKeyScope::ReadOnly => ApiKeyScope::ReadOnly,
                wire::ApiKeyScope::Payments => ApiKeyScope::Payments,
            },
            state: match key.state {
                wire::ApiKeyState::Active => ApiKeyState::Active,
                wire::ApiKeyState::Expired => ApiKeyState::Expired,
                wire::ApiKeyState::Revoked => ApiKeyState::Revoked,
            },
            created_at: OffsetDateTime::parse(&key.created_at, &Rfc3339)
                .map_err(|e| format!("created_at: {e}"))?,
            expires_at: optional_time(key.expires_at.as_deref(), "expires_at")?,
            revoked_at: optional_time(key.revoked_at.as_deref(), "revoked_at")?,
            last_used_at: optional_time(key.last_used_at.as_deref(), "last_used_at")?,
            id: key.id,
            livemode: key.livemode,
            prefix: key.prefix,
            description: key.description,
            secret: key.secret,
            replayed: false,
        })
    }
}

/// The body of `POST /v1/api-keys`, as sent.
pub(crate) fn create_api_key_json(
    scope: ApiKeyScope,
    description: Option<&str>,
    expires_at: Option<OffsetDateTime>,
) -> Result<Value, String> {
    let body = wire::CreateApiKey {
        scope: match scope {
            ApiKeyScope::Full => wire::ApiKeyScope::Full,
            ApiKeyScope::ReadOnly => wire::ApiKeyScope::ReadOnly,
            ApiKeyScope::Payments => wire::ApiKeyScope::Payments,
        },
        description: description.map(str::to_owned),
        expires_at: expires_at
            .map(|at| at.format(&Rfc3339))
            .transpose()
            .map_err(|e| format!("expires_at: {e}"))?,
    };
    without_nulls(serde_json::to_value(body).map_err(|e| e.to_string())?)
}

/// A body without its `null` members: the same bytes as the other SDKs
/// send for the same request (the service fingerprints the JSON, so a
/// repeat under the same key from another SDK is recognised).
fn without_nulls(mut value: Value) -> Result<Value, String> {
    if let Some(members) = value.as_object_mut() {
        members.retain(|_, v| !v.is_null());
    }
    Ok(value)
}

/// The body of `POST /v1/api-keys/{id}/roll`, as sent: the old key's
/// overlap in whole seconds (rounded down), or `{}` for the service's
/// default (24 h).
pub(crate) fn roll_api_key_json(expire_old_in: Option<Duration>) -> Result<Value, String> {
    let body = wire::RollApiKey {
        expire_old_in_seconds: expire_old_in.map(|overlap| overlap.as_secs()),
    };
    without_nulls(serde_json::to_value(body).map_err(|e| e.to_string())?)
}

/// `GET /v1/api-keys`: every key of the shop, newest first, in one page.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(from = "wire::List<ApiKey>")]
pub(crate) struct ApiKeyList {
    /// The keys.
    pub(crate) data: Vec<ApiKey>,
}

impl From<wire::List<ApiKey>> for ApiKeyList {
    fn from(list: wire::List<ApiKey>) -> Self {
        Self { data: list.data }
    }
}

/// A shop's webhook endpoint, as `/v1/webhook-endpoints` shows it (read
/// from a [`wire::WebhookEndpoint`]): where its events go.
///
/// Its [`secret`](WebhookEndpoint::secret) is there only in the answer to
/// the request that made it ([`Client::create_webhook_endpoint`](crate::Client::create_webhook_endpoint),
/// [`Client::roll_webhook_endpoint_secret`](crate::Client::roll_webhook_endpoint_secret)).
/// A repeat of that request under the same idempotency key answers the
/// endpoint without it ([`WebhookEndpoint::replayed`]). `Debug` does not
/// show the secret.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "wire::WebhookEndpoint")]
pub struct WebhookEndpoint {
    /// Its id (`we_` and 32 hex digits).
    pub id: String,
    /// `true` for live mode (real money, the acquirer), `false` for test
    /// mode (made with a test key; it receives only test events). `true`
    /// when the answer has no `livemode` (stored before test mode existed:
    /// live).
    pub livemode: bool,
    /// Where events are POSTed.
    pub url: String,
    /// The event types it receives, sorted, or `["*"]` for every type.
    pub enabled_events: Vec<String>,
    /// What it is for.
    pub description: Option<String>,
    /// Whether events are delivered to it now.
    pub enabled: bool,
    /// `true` for the endpoint the operator set (`shops set-webhook`).
    pub managed_by_operator: bool,
    /// When it was made.
    pub created_at: OffsetDateTime,
    /// While a rolled-over secret still signs beside the new one: when it
    /// stops.
    pub previous_secret_expires_at: Option<OffsetDateTime>,
    /// The signing secret (`whsec_...`), in the answer that made it only;
    /// `None` everywhere else, a replay included. Keep it now.
    pub secret: Option<String>,
    /// Not a wire member: whether the answer was a replay of the
    /// idempotency key's first request (`Idempotent-Replayed: true`), which
    /// changed nothing and carries no secret.
    pub replayed: bool,
}

impl fmt::Debug for WebhookEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebhookEndpoint")
            .field("id", &self.id)
            .field("livemode", &self.livemode)
            .field("url", &self.url)
            .field("enabled_events", &self.enabled_events)
            .field("description", &self.description)
            .field("enabled", &self.enabled)
            .field("managed_by_operator", &self.managed_by_operator)
            .field("created_at", &self.created_at)
            .field(
                "previous_secret_expires_at",
                &self.previous_secret_expires_at,
            )
            .field("secret", &self.secret.as_ref().map(|_| "***"))
            .field("replayed", &self.replayed)
            .finish()
    }
}

impl TryFrom<wire::WebhookEndpoint> for WebhookEndpoint {
    type Error = String;

    fn try_from(endpoint: wire::WebhookEndpoint) -> Result<Self, String> {
        Ok(Self {
            created_at: OffsetDateTime::parse(&endpoint.created_at, &Rfc3339)
                .map_err(|e| format!("created_at: {e}"))?,
            previous_secret_expires_at: optional_time(
                endpoint.previous_secret_expires_at.as_deref(),
                "previous_secret_expires_at",
            )?,
            id: endpoint.id,
            livemode: endpoint.livemode,
            url: endpoint.url,
            enabled_events: endpoint.enabled_events,
            description: endpoint.description,
            enabled: endpoint.enabled,
            managed_by_operator: endpoint.managed_by_operator,
            secret: endpoint.secret,
            replayed: false,
        })
    }
}

/// What [`Client::update_webhook_endpoint`](crate::Client::update_webhook_endpoint)
/// changes: only the fields that are `Some`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WebhookEndpointUpdate {
    /// New event types, or `["*"]` for every type.
    pub enabled_events: Option<Vec<String>>,
    /// `false` pauses deliveries (open ones wait), `true` resumes them.
    pub enabled: Option<bool>,
    /// A new description; `Some("")` clears it.
    pub description: Option<String>,
}

/// The body of `POST /v1/webhook-endpoints`, as sent (no `description`
/// member when there is none).
pub(crate) fn create_webhook_endpoint_json(
    url: &str,
    enabled_events: &[&str],
    description: Option<&str>,
) -> Result<Value, String> {
    let body = wire::CreateWebhookEndpoint {
        url: url.to_owned(),
        enabled_events: enabled_events.iter().map(|e| (*e).to_owned()).collect(),
        description: description.map(str::to_owned),
    };
    without_nulls(serde_json::to_value(body).map_err(|e| e.to_string())?)
}

/// The body of `POST /v1/webhook-endpoints/{id}`, as sent: the fields to
/// change only.
pub(crate) fn update_webhook_endpoint_json(
    update: &WebhookEndpointUpdate,
) -> Result<Value, String> {
    let body = wire::UpdateWebhookEndpoint {
        enabled_events: update.enabled_events.clone(),
        enabled: update.enabled,
        description: update.description.clone(),
    };
    without_nulls(serde_json::to_value(body).map_err(|e| e.to_string())?)
}

/// The body of `POST /v1/webhook-endpoints/{id}/roll-secret`, as sent: the
/// old secret's overlap in whole seconds (rounded down), or `{}` for the
/// service's default (24 h).
pub(crate) fn roll_webhook_endpoint_secret_json(
    expire_old_in: Option<Duration>,
) -> Result<Value, String> {
    let body = wire::RollWebhookEndpointSecret {
        expire_old_in_seconds: expire_old_in.map(|overlap| overlap.as_secs()),
    };
    without_nulls(serde_json::to_value(body).map_err(|e| e.to_string())?)
}

/// `GET /v1/webhook-endpoints`: every endpoint of the shop, oldest first,
/// in one page.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(from = "wire::List<WebhookEndpoint>")]
pub(crate) struct WebhookEndpointList {
    /// The endpoints.
    pub(crate) data: Vec<WebhookEndpoint>,
}

impl From<wire::List<WebhookEndpoint>> for WebhookEndpointList {
    fn from(list: wire::List<WebhookEndpoint>) -> Self {
        Self { data: list.data }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_payment_the_server_renders() {
        let body = r#"{"id":"pay_01a2297968b375bcb36eb8e661248216","object":"payment","shop_id":"demo","status":"succeeded","amount":{"value":"1500.00","currency":"RUB"},"reference":"order-123","provider_payment_id":"ch_1","decline_code":null,"created_at":"2026-11-29T22:42:32.243Z","amount_refunded":{"value":"0.00","currency":"RUB"},"refund_status":"none"}"#;
        let payment: Payment = serde_json::from_str(body).unwrap();
        assert_eq!(payment.status, PaymentStatus::Succeeded);
        assert_eq!(payment.amount, Money::parse("1500", "RUB").unwrap());
        assert_eq!(payment.provider_payment_id.as_deref(), Some("ch_1"));
        let bad = body.replace("succeeded", "lost");
        assert!(serde_json::from_str::<Payment>(&bad).is_err());
    }

    /// `livemode` as sent; an answer without it (stored before test mode
    /// existed) is live.
    #[test]
    fn reads_the_mode_of_each_object() {
        let payment = r#"{"id":"pay_1","object":"payment","shop_id":"demo","status":"succeeded","amount":{"value":"15.00","currency":"RUB"},"reference":"o1","provider_payment_id":null,"decline_code":null,"created_at":"2026-11-29T22:42:32.243Z","amount_refunded":{"value":"0.00","currency":"RUB"},"refund_status":"none"}"#;
        let refund = r#"{"id":"re_1","object":"refund","payment_id":"pay_1","shop_id":"demo","status":"succeeded","amount":{"value":"15.00","currency":"RUB"},"provider_refund_id":null,"failure_code":null,"created_at":"2026-11-29T22:45:01.120Z"}"#;
        let capture = r#"{"id":"cap_1","object":"capture","payment_id":"pay_1","shop_id":"demo","status":"succeeded","amount":{"value":"15.00","currency":"RUB"},"final":true,"provider_capture_id":null,"failure_code":null,"created_at":"2026-11-29T22:45:01.120Z"}"#;
        let endpoint = r#"{"id":"we_1","object":"webhook_endpoint","url":"https://shop.example/hooks","enabled_events":["*"],"description":null,"enabled":true,"managed_by_operator":false,"created_at":"2026-12-06T10:00:00.000Z","previous_secret_expires_at":null}"#;
        let in_mode = |body: &str, livemode: bool| {
            body.replacen(",", &format!(r#","livemode":{livemode},"#), 1)
        };
        assert!(serde_json::from_str::<Payment>(payment).unwrap().livemode);
        assert!(serde_json::from_str::<Refund>(refund).unwrap().livemode);
        assert!(serde_json::from_str::<Capture>(capture).unwrap().livemode);
        assert!(
            serde_json::from_str::<WebhookEndpoint>(endpoint)
                .unwrap()
                .livemode
        );
        for livemode in [true, false] {
            let payment: Payment = serde_json::from_str(&in_mode(payment, livemode)).unwrap();
            let refund: Refund = serde_json::from_str(&in_mode(refund, livemode)).unwrap();
            let capture: Capture = serde_json::from_str(&in_mode(capture, livemode)).unwrap();
            let endpoint: WebhookEndpoint =
                serde_json::from_str(&in_mode(endpoint, livemode)).unwrap();
            assert_eq!(
                [
                    payment.livemode,
                    refund.livemode,
                    capture.livemode,
                    endpoint.livemode
                ],
                [livemode; 4]
            );
            assert!(format!("{endpoint:?}").contains(&format!("livemode: {livemode}")));
        }
    }

    #[test]
    fn reads_the_simulator_ledger() {
        let body = r#"{"charges":[{"id":"ch_1","acquirer_key":"chargeonce-pay_1","shop_id":"demo","payment_id":"pay_1","reference":"o1","amount":{"value":"1500.00","currency":"RUB"},"amount_minor":150000,"status":"succeeded","decline_code":null,"created_at":"2026-11-29T23:17:49.501Z","refunded_minor":0}],"total_succeeded":[{"currency":"RUB","amount":"1500.00","count":1}]}"#;
        let ledger: Ledger = serde_json::from_str(body).unwrap();
        assert_eq!(ledger.charges[0].amount.minor_units(), 150_000);
        assert_eq!(ledger.total_succeeded[0].count, 1);
    }

    #[test]
    fn reads_an_api_key_and_hides_its_secret() {
        let body = r#"{"id":"key_01a2297968c07d11b0f4c7e8e0d6a3b1","object":"api_key","livemode":true,"scope":"read_only","prefix":"sk_live_4f3a","description":"support","state":"active","created_at":"2026-12-06T10:00:00.000Z","expires_at":null,"revoked_at":null,"last_used_at":null,"secret":"sk_live_4f3a9c0e5b7d"}"#;
        let key: ApiKey = serde_json::from_str(body).unwrap();
        assert_eq!(key.scope, ApiKeyScope::ReadOnly);
        assert_eq!(key.state, ApiKeyState::Active);
        assert_eq!(key.secret.as_deref(), Some("sk_live_4f3a9c0e5b7d"));
        assert!(!key.replayed);
        assert!(!format!("{key:?}").contains("9c0e5b7d"));
        let bad = body.replace("\"active\"", "\"lost\"");
        assert!(serde_json::from_str::<ApiKey>(&bad).is_err());
    }

    #[test]
    fn api_key_bodies() {
        let body = create_api_key_json(ApiKeyScope::ReadOnly, Some("support"), None).unwrap();
        assert_eq!(body["scope"], "read_only");
        assert_eq!(body["description"], "support");
        assert_eq!(
            create_api_key_json(ApiKeyScope::Full, None, None)
                .unwrap()
                .to_string(),
            r#"{"scope":"full"}"#
        );
        assert_eq!(roll_api_key_json(None).unwrap().to_string(), "{}");
        assert_eq!(
            roll_api_key_json(Some(Duration::from_secs(3600)))
                .unwrap()
                .to_string(),
            r#"{"expire_old_in_seconds":3600}"#
        );
    }
    #[test]
    fn reads_a_webhook_endpoint_and_hides_its_secret() {
        let body = r#"{"id":"we_01a2297968c07d11b0f4c7e8e0d6a3b1","object":"webhook_endpoint","url":"https://shop.example/hooks","enabled_events":["payment.succeeded"],"description":null,"enabled":true,"managed_by_operator":false,"created_at":"2026-12-06T10:00:00.000Z","previous_secret_expires_at":null,"secret":"whsec_4f3a9c0e5b7d"}"#;
        let endpoint: WebhookEndpoint = serde_json::from_str(body).unwrap();
        assert_eq!(endpoint.enabled_events, ["payment.succeeded"]);
        assert_eq!(endpoint.secret.as_deref(), Some("whsec_4f3a9c0e5b7d"));
        assert!(!endpoint.replayed);
        assert!(!format!("{endpoint:?}").contains("9c0e5b7d"));
        let without = body.replace(r#","secret":"whsec_4f3a9c0e5b7d""#, "");
        let endpoint: WebhookEndpoint = serde_json::from_str(&without).unwrap();
        assert_eq!(endpoint.secret, None);
    }

    #[test]
    fn webhook_endpoint_bodies() {
        let body = create_webhook_endpoint_json("https://x.example/h", &["*"], None).unwrap();
        assert_eq!(
            body,
            serde_json::json!({"url": "https://x.example/h", "enabled_events": ["*"]})
        );
        let update = WebhookEndpointUpdate {
            enabled: Some(false),
            ..WebhookEndpointUpdate::default()
        };
        assert_eq!(
            update_webhook_endpoint_json(&update).unwrap().to_string(),
            r#"{"enabled":false}"#
        );
        assert_eq!(
            roll_webhook_endpoint_secret_json(None).unwrap().to_string(),
            "{}"
        );
        assert_eq!(
            roll_webhook_endpoint_secret_json(Some(Duration::from_secs(60)))
                .unwrap()
                .to_string(),
            r#"{"expire_old_in_seconds":60}"#
        );
    }
}
