//! The lifecycle of a manual-capture payment, as pure judgement: an
//! authorization holds money on the customer's card; captures take parts of
//! it (each with its own key, several until one is final or the hold is used
//! up); a void, or the authorization's expiry, releases what is left.
//!
//! [`Authorization`] is the state every store row and every answer is
//! derived from, and its methods are the only moves: each returns the next
//! state, or the refusal that leaves the state as it was. The stores write
//! the same conditions as conditional updates (the database settles races
//! between instances); this module says what those conditions are, and its
//! exhaustive test walks every order of moves on a small hold to prove the
//! money invariants:
//!
//! - captured plus in flight never exceeds what was authorized;
//! - no capture is accepted while a release (void or expiry) is asked or
//!   after it, and no capture is in flight when a release is asked, so no
//!   capture can succeed after a void succeeded;
//! - a final capture closes the hold: nothing more is accepted while it
//!   runs, and once it succeeds;
//! - only captured money can be refunded.
//!
//! ```
//! use chargeonce_core::authorization::{Authorization, AuthorizationStatus, CaptureAsk};
//!
//! // Authorize 1500.00, capture 1000.00 and then the rest in two shipments.
//! let hold = Authorization::new(150_000);
//! let (hold, first) = hold.reserve_capture(CaptureAsk::part(100_000)).unwrap();
//! let hold = hold.capture_settled(first, true);
//! assert_eq!(hold.status(), AuthorizationStatus::PartiallyCaptured);
//! let (hold, rest) = hold.reserve_capture(CaptureAsk::rest()).unwrap();
//! assert_eq!(rest.amount_minor(), 50_000);
//! let hold = hold.capture_settled(rest, true);
//! assert_eq!(hold.status(), AuthorizationStatus::Succeeded);
//! assert_eq!(hold.refundable_minor(0), 150_000);
//! ```

crate::id::prefixed_id!(
    /// Our id of a capture: `cap_` followed by a UUIDv7 (time-ordered).
    CaptureId,
    "cap_"
);

impl CaptureId {
    /// The acquirer key of this capture: derived from its id, never random,
    /// so every retry, take-over or completer run sends the same one.
    pub fn acquirer_key(&self) -> crate::AcquirerKey {
        crate::AcquirerKey::from_stored(format!("chargeonce-{}", self.0))
    }
}

/// How a payment takes its money.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum CaptureMethod {
    /// Authorized and captured in one acquirer call: today's charge.
    #[default]
    Automatic,
    /// Authorized first; the shop captures later, in one or several parts,
    /// or voids.
    Manual,
}

impl CaptureMethod {
    /// As stored and shown (`automatic`, `manual`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Automatic => "automatic",
            Self::Manual => "manual",
        }
    }

    /// Parses a stored or sent capture method.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "automatic" => Some(Self::Automatic),
            "manual" => Some(Self::Manual),
            _ => None,
        }
    }
}

/// Why a hold's remainder is released.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReleaseReason {
    /// The shop voided it (`POST /v1/payments/{id}/void`).
    Void,
    /// It was not captured in time (`serve --authorization-ttl`).
    Expiry,
}

/// Where a hold stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Hold {
    /// Captures are accepted.
    Open,
    /// A final capture is in flight: nothing more is accepted; it ends
    /// [`Hold::Captured`] when it succeeds, [`Hold::Open`] again when refused.
    Closing,
    /// A release was asked and sent: nothing is accepted until it ends.
    Releasing(ReleaseReason),
    /// Final: a final capture succeeded, or the whole amount was captured.
    Captured,
    /// Final: the rest was released, for this reason.
    Released(ReleaseReason),
}

impl ReleaseReason {
    /// As stored and shown (`void`, `expiry`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Void => "void",
            Self::Expiry => "expiry",
        }
    }
}

impl Hold {
    /// As stored (`open`, `closing`, `releasing_void`, `releasing_expiry`,
    /// `captured`, `released_void`, `released_expiry`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Closing => "closing",
            Self::Releasing(ReleaseReason::Void) => "releasing_void",
            Self::Releasing(ReleaseReason::Expiry) => "releasing_expiry",
            Self::Captured => "captured",
            Self::Released(ReleaseReason::Void) => "released_void",
            Self::Released(ReleaseReason::Expiry) => "released_expiry",
        }
    }

    /// Parses a stored hold.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "open" => Self::Open,
            "closing" => Self::Closing,
            "releasing_void" => Self::Releasing(ReleaseReason::Void),
            "releasing_expiry" => Self::Releasing(ReleaseReason::Expiry),
            "captured" => Self::Captured,
            "released_void" => Self::Released(ReleaseReason::Void),
            "released_expiry" => Self::Released(ReleaseReason::Expiry),
            _ => return None,
        })
    }

    /// Every hold, for tests and checks.
    pub const ALL: [Self; 7] = [
        Self::Open,
        Self::Closing,
        Self::Releasing(ReleaseReason::Void),
        Self::Releasing(ReleaseReason::Expiry),
        Self::Captured,
        Self::Released(ReleaseReason::Void),
        Self::Released(ReleaseReason::Expiry),
    ];
}

/// What a payment with a hold shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AuthorizationStatus {
    /// Authorized, nothing captured yet.
    Authorized,
    /// Some captured, the hold still open (or closing, or being released).
    PartiallyCaptured,
    /// Capture finished: what was captured is the payment's amount taken.
    Succeeded,
    /// Released by a void with nothing captured.
    Voided,
    /// Released by expiry with nothing captured.
    Expired,
}

impl AuthorizationStatus {
    /// As stored and shown.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Authorized => "authorized",
            Self::PartiallyCaptured => "partially_captured",
            Self::Succeeded => "succeeded",
            Self::Voided => "voided",
            Self::Expired => "expired",
        }
    }
}

/// A capture as asked: an amount, or everything capturable (then final).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaptureAsk {
    amount_minor: Option<i64>,
    last: bool,
}

impl CaptureAsk {
    /// A part of the hold; more captures may follow.
    pub fn part(amount_minor: i64) -> Self {
        Self {
            amount_minor: Some(amount_minor),
            last: false,
        }
    }

    /// An amount that is the last capture: the rest is released once it
    /// succeeds (Stripe's `final_capture`).
    pub fn last(amount_minor: i64) -> Self {
        Self {
            amount_minor: Some(amount_minor),
            last: true,
        }
    }

    /// Everything still capturable, as the last capture (a capture with no
    /// amount).
    pub fn rest() -> Self {
        Self {
            amount_minor: None,
            last: true,
        }
    }
}

/// A capture accepted against the hold, in flight until it settles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaptureReservation {
    amount_minor: i64,
    last: bool,
}

impl CaptureReservation {
    /// A reservation read back from a stored capture: its amount and
    /// whether it is the last.
    pub fn from_parts(amount_minor: i64, last: bool) -> Self {
        Self { amount_minor, last }
    }

    /// How much it captures.
    pub fn amount_minor(&self) -> i64 {
        self.amount_minor
    }

    /// Whether it is the last capture.
    pub fn is_last(&self) -> bool {
        self.last
    }
}

/// Why a capture is refused (nothing is reserved or sent).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CaptureRefusal {
    /// The amount is not positive.
    #[error("a capture's amount must be positive")]
    NotPositive,
    /// More than is capturable now.
    #[error("the capture exceeds what is capturable ({capturable_minor} minor units)")]
    ExceedsCapturable {
        /// What is capturable now.
        capturable_minor: i64,
    },
    /// A final capture or a release is in flight: ask again once it ended.
    #[error("a final capture or a release of this authorization is in progress")]
    InProgress,
    /// The hold is closed (captured, voided or expired).
    #[error("the authorization is {}: nothing more can be captured", .0.as_str())]
    Closed(AuthorizationStatus),
}

/// Why a release (void or expiry) is refused (nothing is sent).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ReleaseRefusal {
    /// Captures are in flight: their outcome decides what is left to
    /// release; ask again once they ended.
    #[error("captures of this authorization are in progress")]
    CapturesInProgress,
    /// Another release is in flight.
    #[error("a release of this authorization is in progress")]
    ReleaseInProgress,
    /// The hold is closed (captured, voided or expired).
    #[error("the authorization is {}: nothing is left to release", .0.as_str())]
    Closed(AuthorizationStatus),
}

/// A release accepted: how much of the hold it gives back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReleasePlan {
    /// Why.
    pub reason: ReleaseReason,
    /// What is given back: authorized minus captured.
    pub release_minor: i64,
}

/// An authorization's hold: what was authorized, what was captured, what
/// captures in flight have reserved, and where it stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Authorization {
    authorized_minor: i64,
    captured_minor: i64,
    in_flight_minor: i64,
    in_flight: u32,
    hold: Hold,
}

impl Authorization {
    /// A fresh hold of `authorized_minor`.
    pub fn new(authorized_minor: i64) -> Self {
        Self {
            authorized_minor,
            captured_minor: 0,
            in_flight_minor: 0,
            in_flight: 0,
            hold: Hold::Open,
        }
    }

    /// A hold read back from its stored parts.
    pub fn from_parts(
        authorized_minor: i64,
        captured_minor: i64,
        in_flight_minor: i64,
        in_flight: u32,
        hold: Hold,
    ) -> Self {
        Self {
            authorized_minor,
            captured_minor,
            in_flight_minor,
            in_flight,
            hold,
        }
    }

    /// What was authorized.
    pub fn authorized_minor(&self) -> i64 {
        self.authorized_minor
    }

    /// What captures took so far.
    pub fn captured_minor(&self) -> i64 {
        self.captured_minor
    }

    /// What captures in flight have reserved.
    pub fn in_flight_minor(&self) -> i64 {
        self.in_flight_minor
    }

    /// How many captures are in flight.
    pub fn in_flight(&self) -> u32 {
        self.in_flight
    }

    /// Where the hold stands.
    pub fn hold(&self) -> Hold {
        self.hold
    }

    /// What a new capture may take now (0 unless the hold is open).
    pub fn capturable_minor(&self) -> i64 {
        match self.hold {
            Hold::Open => self.authorized_minor - self.captured_minor - self.in_flight_minor,
            _ => 0,
        }
    }

    /// What refunds may give back in all: captured money only, less what
    /// refunds already took or reserved.
    pub fn refundable_minor(&self, refunded_or_reserved_minor: i64) -> i64 {
        (self.captured_minor - refunded_or_reserved_minor).max(0)
    }

    /// What the payment shows.
    pub fn status(&self) -> AuthorizationStatus {
        let none_captured = self.captured_minor == 0;
        match self.hold {
            Hold::Captured => AuthorizationStatus::Succeeded,
            Hold::Released(_) if !none_captured => AuthorizationStatus::Succeeded,
            Hold::Released(ReleaseReason::Void) => AuthorizationStatus::Voided,
            Hold::Released(ReleaseReason::Expiry) => AuthorizationStatus::Expired,
            _ if none_captured => AuthorizationStatus::Authorized,
            _ => AuthorizationStatus::PartiallyCaptured,
        }
    }

    /// Accepts a capture against the hold: its amount is reserved until it
    /// settles ([`Authorization::capture_settled`]); a last capture closes
    /// the hold to others meanwhile.
    pub fn reserve_capture(
        &self,
        ask: CaptureAsk,
    ) -> Result<(Self, CaptureReservation), CaptureRefusal> {
        match self.hold {
            Hold::Open => {}
            Hold::Closing | Hold::Releasing(_) => return Err(CaptureRefusal::InProgress),
            Hold::Captured | Hold::Released(_) => {
                return Err(CaptureRefusal::Closed(self.status()));
            }
        }
        let capturable_minor = self.capturable_minor();
        let amount_minor = ask.amount_minor.unwrap_or(capturable_minor);
        if ask.amount_minor.is_some_and(|a| a <= 0) {
            return Err(CaptureRefusal::NotPositive);
        }
        if amount_minor <= 0 || amount_minor > capturable_minor {
            return Err(CaptureRefusal::ExceedsCapturable { capturable_minor });
        }
        let next = Self {
            in_flight_minor: self.in_flight_minor + amount_minor,
            in_flight: self.in_flight + 1,
            hold: if ask.last { Hold::Closing } else { Hold::Open },
            ..*self
        };
        let reservation = CaptureReservation {
            amount_minor,
            last: ask.last,
        };
        Ok((next, reservation))
    }

    /// A capture's definite outcome: `succeeded` takes its amount, a
    /// refusal gives the reservation back (and a refused last capture
    /// reopens the hold). A closing hold closes once nothing is in flight:
    /// its last capture then succeeded, or the hold would be open again.
    pub fn capture_settled(&self, reservation: CaptureReservation, succeeded: bool) -> Self {
        let taken = if succeeded {
            reservation.amount_minor
        } else {
            0
        };
        let captured_minor = self.captured_minor + taken;
        let in_flight = self.in_flight.saturating_sub(1);
        let hold = match self.hold {
            Hold::Closing if reservation.last && !succeeded => Hold::Open,
            Hold::Closing if in_flight == 0 => Hold::Captured,
            // Used up: nothing else can be in flight (their amounts count).
            Hold::Open if captured_minor == self.authorized_minor => Hold::Captured,
            other => other,
        };
        Self {
            captured_minor,
            in_flight_minor: self.in_flight_minor - reservation.amount_minor,
            in_flight,
            hold,
            ..*self
        }
    }

    /// Accepts a release of what is left (a void or the expiry): nothing
    /// may be in flight, since the captures' outcomes decide what is left.
    pub fn request_release(
        &self,
        reason: ReleaseReason,
    ) -> Result<(Self, ReleasePlan), ReleaseRefusal> {
        match self.hold {
            Hold::Open if self.in_flight == 0 => {}
            Hold::Open | Hold::Closing => return Err(ReleaseRefusal::CapturesInProgress),
            Hold::Releasing(_) => return Err(ReleaseRefusal::ReleaseInProgress),
            Hold::Captured | Hold::Released(_) => {
                return Err(ReleaseRefusal::Closed(self.status()));
            }
        }
        let plan = ReleasePlan {
            reason,
            release_minor: self.authorized_minor - self.captured_minor,
        };
        let next = Self {
            hold: Hold::Releasing(reason),
            ..*self
        };
        Ok((next, plan))
    }

    /// A release's definite outcome: the hold is released, or (refused,
    /// nothing moved) open again.
    pub fn release_settled(&self, succeeded: bool) -> Self {
        let hold = match self.hold {
            Hold::Releasing(reason) if succeeded => Hold::Released(reason),
            Hold::Releasing(_) => Hold::Open,
            other => other,
        };
        Self { hold, ..*self }
    }
}

#[cfg(test)]
mod tests;
