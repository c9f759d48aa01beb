//! # chargeonce-acquirer
//!
//! The acquirer simulator of chargeonce: an in-process **simulator** of the bank that
//! really moves money. Its ledger (a SQLite file of its own) is the ground truth
//! of "how much money moved": the service's own tables say what it *believes*,
//! the ledger says what *happened*.
//!
//! The [`Simulator`] implements [`chargeonce_core::Acquirer`] and behaves like a
//! real, idempotent acquirer:
//!
//! - **Idempotent on the acquirer key.** One key is one ledger row, ever. A repeat
//!   with the same key and the same parameters gets the stored answer and moves no
//!   money; a repeat with other parameters is refused (see [`KEY_REUSED`]).
//!   The card token is not stored and not compared: a repeat is answered from the
//!   ledger whatever token it carries.
//! - **Safe across processes.** Several processes may open the same ledger file and
//!   charge at once, as they would share one bank: the row is written by a single
//!   `INSERT ... ON CONFLICT (acquirer_key) DO NOTHING`, and only the caller whose
//!   insert wrote the row applies the "first call" behaviours (a lost answer, a
//!   slow answer).
//! - **Behaviour chosen by the card token** (see [`Behaviour`]): `tok_ok`,
//!   `tok_declined`, `tok_insufficient_funds`, `tok_timeout` (charged, but the
//!   answer is lost), `tok_slow` (charged, answered late). Any other token is
//!   declined with `unknown_token` ([`UNKNOWN_TOKEN`]): a typo never charges.
//!
//! - **Holds and captures.** A charge with [`CaptureMethod::Manual`](chargeonce_core::CaptureMethod::Manual) only holds
//!   its amount (an authorization): [`Acquirer::capture`](chargeonce_core::Acquirer::capture) takes parts of it,
//!   several until the last or until it is used up, never beyond it (one
//!   ledger write checks and inserts, across processes); [`Acquirer::void`](chargeonce_core::Acquirer::void)
//!   releases the rest, once. Refunds give back captured money only, and the
//!   ledger's totals count what was taken. In process only so far: the HTTP
//!   API and `HttpAcquirer` answer `capture_not_supported`.
//!
//! [`router`] serves the ledger as JSON (`GET /ledger`), for people and for the
//! `chaos` checks.
//!
//! **Standalone** (`chargeonce acquirer`), the simulator is its own process:
//! [`api_router`] serves charges, look-ups, refunds and an admin API that sets
//! [`Faults`] (latency, declines, 5xx, hangs, answers lost after commit) while
//! it runs; [`webhooks::spawn`] delivers signed `payment.*` events at least
//! once. It can run without idempotency ([`Simulator::with_idempotency`]),
//! like some real providers. The service talks to it through the
//! `chargeonce-connector` crate's `HttpAcquirer`, which classifies every
//! outcome as definite, unknown, or never sent; this crate serves that
//! crate's protocol and is never part of a production call path.
//!
//! ```
//! use chargeonce_acquirer::{Simulator, SimulatorConfig};
//! use chargeonce_core::{
//!     Acquirer, AcquirerKey, CaptureMethod, CardToken, ChargeRequest, ChargeResult, Money,
//!     PaymentId, Reference, ShopId,
//! };
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let sim = Simulator::in_memory(SimulatorConfig::default()).await?;
//! let payment_id = PaymentId::generate();
//! let request = ChargeRequest {
//!     acquirer_key: AcquirerKey::for_payment(&payment_id),
//!     shop_id: ShopId::new("demo-shop")?,
//!     payment_id,
//!     reference: Reference::new("order-123")?,
//!     amount: Money::parse("1500.00", "RUB")?,
//!     token: CardToken::new("tok_ok")?,
//!     capture_method: CaptureMethod::Automatic,
//! };
//! let first = sim.charge(&request).await?;
//! let again = sim.charge(&request).await?;
//! assert!(matches!(first, ChargeResult::Succeeded { .. }));
//! assert_eq!(first, again);
//! assert_eq!(sim.ledger().await?.len(), 1);
//! # Ok(())
//! # }
//! ```

pub mod api;
mod entry;
mod error;
pub mod faults;
mod http;
mod in_flight_duplicate;
mod ledger;
mod report;
mod simulator;
pub mod webhooks;

pub use api::api_router;
pub use entry::{ChargeStatus, LedgerEntry};
pub use error::{CaptureError, RefundError, SimulatorError};
pub use faults::{Faults, FaultsError};
pub use http::router;
pub use report::{CurrencyTotal, LedgerReport};
pub use simulator::{
    Behaviour, CARD_DECLINED, DO_NOT_HONOR, IN_FLIGHT_DUPLICATE, INSUFFICIENT_FUNDS,
    InFlightDuplicate, KEY_REUSED, LOST_ANSWER, REFUND_CHARGE_DECLINED, REFUND_EXCEEDS_CHARGE,
    REFUND_NO_SUCH_CHARGE, RefundRecord, Simulator, SimulatorConfig, UNKNOWN_TOKEN, tokens,
};
pub use simulator::{CaptureRecord, VoidRecord};
