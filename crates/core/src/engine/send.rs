//! Phase 2, written once for charges and refunds: the acquirer call, and
//! what its answer means.
//!
//! A [`Movement`] is one movement of money sent to the acquirer (a charge
//! of a payment, or a refund), and knows only what differs between the two: the calls, how an
//! answer settles the payment or refund, its log lines and its outcomes.
//! The judgement is here, the same for both:
//!
//! - **look up before a resend.** An acquirer idempotent on our key answers a
//!   resent attempt with the first one's result, so it is simply sent again.
//!   One that ignores keys ([`Acquirer::is_idempotent`] is `false`) would
//!   execute it twice: a resumed attempt is first looked up by our reference
//!   (the key was parked for the settle window after that attempt, so what it
//!   did has had time to appear), and sent only if nothing is found.
//! - **a refusal of a resumed attempt is not believed at once** (the resend
//!   rule, [`super::resend`]). A first send proves it: nothing was sent
//!   before. A resend does not: the attempt resumed may have executed, or
//!   still be running, and the refusal may be of the repeat only. What a
//!   look-up finds at once is the answer; if it finds nothing, the key is
//!   parked for the settle window, and only a look-up after it that still
//!   finds nothing confirms the refusal (nothing is sent again meanwhile).
//!   An answer that only a resend makes ambiguous
//!   ([`Movement::refused_on_resend`]) is such a refusal too.
//! - **a look-up's own refusal proves nothing** about the attempt looked for:
//!   unknown.
//! - the answer then ends as a settlement (phase 3), "not sent" (the lease is
//!   released: the next retry sends it), or unknown (see
//!   `Engine::after_unknown`).

use super::lease::Trail;
use super::{Engine, EngineError, Holder, Outcome, resend};
use crate::history::{AcquirerAttempt, HistoryEntry};
use crate::observe::{AcquirerCall, AcquirerOutcomeKind};
use crate::{Acquirer, AcquirerError, Lease, PaymentId, ShopId};

/// One movement of money sent to the acquirer: what differs between a
/// charge and a refund.
pub(super) trait Movement: Send + Sync + Sized {
    /// A definite answer of the acquirer (of a send, or found by a look-up).
    type Answer: Send;
    /// What the answer records on the payment or refund.
    type Settlement: Send;
    /// The observer's name for a send.
    const CALL: AcquirerCall;
    /// How a resumed attempt is named in an error ("a resent charge").
    const RESUMED: &'static str;

    /// The acquirer key every attempt of this movement is sent with.
    fn acquirer_key(&self) -> &str;
    /// The payment whose history records this movement's calls.
    fn payment(&self) -> (&ShopId, &PaymentId);
    /// Sends the movement.
    fn send(
        &self,
        acquirer: &dyn Acquirer,
    ) -> impl Future<Output = Result<Self::Answer, AcquirerError>> + Send;
    /// Looks our attempt up by its reference. What is found for another
    /// amount is not ours to apply: unknown.
    fn look_up(
        &self,
        acquirer: &dyn Acquirer,
    ) -> impl Future<Output = Result<Option<Self::Answer>, AcquirerError>> + Send;
    /// The observer's name for a definite answer.
    fn kind(answer: &Self::Answer) -> AcquirerOutcomeKind;
    /// What a definite answer records.
    fn settlement(answer: Self::Answer) -> Self::Settlement;
    /// What a refusal for good records (`refusal`: its reason, which may be
    /// a code of [`Movement::refused_on_resend`]).
    fn rejected(refusal: &str) -> Self::Settlement;
    /// The code of a definite-looking answer that, to a resend to an
    /// acquirer that ignores keys, is a refusal the resend rule confirms
    /// before it is believed: the attempt resumed may be what the answer is
    /// about, though the look-up before the resend did not show it.
    fn refused_on_resend(answer: &Self::Answer) -> Option<&str> {
        let _ = answer;
        None
    }
    /// A last look at a settlement, for what only this movement knows to
    /// be ambiguous (`resend`: the attempt resumed may have executed, and
    /// nothing was found under its reference).
    fn judge(
        settlement: Self::Settlement,
        resend: bool,
    ) -> Result<Self::Settlement, AcquirerError> {
        let _ = resend;
        Ok(settlement)
    }

    /// Logs an answer found by a look-up (so not sent again).
    fn log_found(&self, lease: &Lease, found: &Self::Answer);
    /// Logs the acquirer's refusal.
    fn log_refused(&self, lease: &Lease, holder: Holder, reason: &str);
    /// Logs a send that certainly reached nothing.
    fn log_not_sent(&self, lease: &Lease, reason: &str);
    /// Logs an answer that is not known.
    fn log_unknown(&self, lease: &Lease, reason: &str);

    /// Phase 3 with a settlement: the fenced finish, recording `attempts`.
    fn finish(
        self,
        engine: &Engine,
        lease: &Lease,
        settlement: Self::Settlement,
        attempts: &[AcquirerAttempt],
    ) -> impl Future<Output = Result<Outcome, EngineError>> + Send;
    /// The outcome when this attempt reached nothing (`resumed`: an earlier
    /// attempt may have reached the acquirer).
    fn unavailable(self, retry_after: std::time::Duration, resumed: bool) -> Outcome;
    /// The outcome when the answer is not known.
    fn pending(self, retry_after: std::time::Duration) -> Outcome;
}

impl Engine {
    /// Phases 2 and 3 of a movement whose lease this caller holds.
    /// `history`: the payment's history when the caller read it already
    /// (a resumed charge, for its cancel check), so it is not read twice.
    pub(super) async fn send_and_finish<O: Movement>(
        &self,
        op: O,
        lease: &Lease,
        holder: Holder,
        history: Option<&[HistoryEntry]>,
    ) -> Result<Outcome, EngineError> {
        let resend = holder == Holder::Resumer && !self.acquirer(op.payment().0).is_idempotent();
        let awaiting = match holder {
            Holder::Resumer => self.refusal_awaits(&op, history).await?,
            Holder::Claimant => None,
        };
        let trail = Trail::default();
        let answer = if awaiting.is_some() {
            self.look_up_to_confirm(&op, lease, &trail).await
        } else if resend {
            self.look_up_else_send(&op, lease, &trail).await
        } else {
            self.send_holding_lease(&op, lease, &trail, false).await
        };
        let settlement = match (answer, awaiting) {
            (Ok(answer), _) => Ok(O::settlement(answer)),
            (Err(AcquirerError::Rejected(reason)), Some(refusal)) => {
                op.log_refused(lease, holder, &reason);
                Ok(O::rejected(&refusal))
            }
            (Err(AcquirerError::Rejected(reason)), None) => {
                self.confirm_rejection(&op, lease, holder, reason, &trail)
                    .await
            }
            (Err(error), _) => Err(error),
        };
        let judged = settlement.and_then(|settlement| O::judge(settlement, resend));
        self.conclude(op, lease, holder, judged, &trail.take())
            .await
    }

    /// A resumed attempt to an acquirer that ignores keys: sent only if the
    /// acquirer has nothing under our reference.
    async fn look_up_else_send<O: Movement>(
        &self,
        op: &O,
        lease: &Lease,
        trail: &Trail,
    ) -> Result<O::Answer, AcquirerError> {
        match self.found(op, lease, trail).await? {
            Some(found) => Ok(found),
            None => self.send_holding_lease(op, lease, trail, true).await,
        }
    }

    /// Looks the movement up, holding the lease; logs what it finds (which
    /// is then the answer, not sent again).
    pub(super) async fn found<O: Movement>(
        &self,
        op: &O,
        lease: &Lease,
        trail: &Trail,
    ) -> Result<Option<O::Answer>, AcquirerError> {
        let found = self.look_up_holding_lease(op, lease, trail).await?;
        if let Some(found) = &found {
            op.log_found(lease, found);
        }
        Ok(found)
    }

    /// The reason of the movement's last send, by an earlier holder, if it
    /// was refused and awaits its confirmation ([`super::resend`]): read
    /// from the payment's history, where the release or parking that ended
    /// that holder's lease wrote its calls.
    async fn refusal_awaits<O: Movement>(
        &self,
        op: &O,
        known: Option<&[HistoryEntry]>,
    ) -> Result<Option<String>, EngineError> {
        let read;
        let history = match known {
            Some(history) => history,
            None => {
                let (shop, payment) = op.payment();
                read = self.store.payment_history(Some(shop), payment).await?;
                &read[..]
            }
        };
        let calls = resend::calls_of(history, op.acquirer_key());
        Ok(resend::refusal_awaiting(calls, O::CALL).map(str::to_owned))
    }

    /// The settle window has passed since a refused resend: the movement
    /// is looked up, and nothing is sent. Found: the answer. Nothing: the
    /// refusal is confirmed (a [`AcquirerError::Rejected`]).
    async fn look_up_to_confirm<O: Movement>(
        &self,
        op: &O,
        lease: &Lease,
        trail: &Trail,
    ) -> Result<O::Answer, AcquirerError> {
        self.found(op, lease, trail).await?.ok_or_else(|| {
            AcquirerError::Rejected(format!(
                "{} was refused, and nothing was found under its reference after the settle window",
                O::RESUMED
            ))
        })
    }

    /// A refusal for good: believed at once from a first send. From a
    /// resend, what a look-up finds at once is the answer; nothing found
    /// leaves it unknown, to be confirmed after the settle window (see
    /// `Engine::conclude`, which parks the key).
    async fn confirm_rejection<O: Movement>(
        &self,
        op: &O,
        lease: &Lease,
        holder: Holder,
        reason: String,
        trail: &Trail,
    ) -> Result<O::Settlement, AcquirerError> {
        op.log_refused(lease, holder, &reason);
        if holder == Holder::Claimant {
            return Ok(O::rejected(&reason));
        }
        match self.look_up_holding_lease(op, lease, trail).await {
            Ok(Some(found)) => Ok(O::settlement(found)),
            Ok(None) => Err(AcquirerError::Unknown(format!(
                "{} was refused ({reason}) and nothing was found yet: an earlier attempt may still land; \
                 confirmed only by a look-up after the settle window",
                O::RESUMED
            ))),
            Err(error) => Err(AcquirerError::Unknown(format!(
                "{} was refused ({reason}) and the look-up failed: {error}",
                O::RESUMED
            ))),
        }
    }

    /// What the judged answer ends in: a settlement finished, a send that
    /// reached nothing (the lease released: the next retry sends it), or an
    /// unknown answer (see `Engine::after_unknown`). Each ends with the
    /// store write that records the calls made (`attempts`).
    pub(super) async fn conclude<O: Movement>(
        &self,
        op: O,
        lease: &Lease,
        holder: Holder,
        judged: Result<O::Settlement, AcquirerError>,
        attempts: &[AcquirerAttempt],
    ) -> Result<Outcome, EngineError> {
        match judged {
            Ok(settlement) => {
                op.finish(self, lease, settlement, attempts)
                    .await
                    .map_err(|error| match error {
                        // The acquirer answered: a store failure now loses an answer.
                        EngineError::Store(error) => EngineError::Unrecorded(error),
                        other => other,
                    })
            }
            Err(AcquirerError::NotSent(reason)) => {
                op.log_not_sent(lease, &reason);
                self.release(lease, attempts).await;
                let resumed = holder == Holder::Resumer;
                Ok(op.unavailable(self.config.retry_after, resumed))
            }
            // A rejection was confirmed (a settlement) or made unknown above.
            Err(AcquirerError::Unknown(reason) | AcquirerError::Rejected(reason)) => {
                op.log_unknown(lease, &reason);
                let calls = attempts
                    .iter()
                    .map(|a| (a.call, a.outcome, a.reason.as_deref().unwrap_or("")));
                let retry_after = if resend::refusal_awaiting(calls, O::CALL).is_some() {
                    // A refused resend: nobody looks again before the
                    // window has passed, whatever the acquirer's mode.
                    self.park(lease, attempts).await
                } else {
                    self.after_unknown(lease, attempts).await
                };
                Ok(op.pending(retry_after))
            }
        }
    }

    /// Sends, holding the lease (`resend`: a resumed attempt to an acquirer
    /// that ignores keys, whose ambiguous answers are refusals to confirm,
    /// recorded as such with their code).
    async fn send_holding_lease<O: Movement>(
        &self,
        op: &O,
        lease: &Lease,
        trail: &Trail,
        resend: bool,
    ) -> Result<O::Answer, AcquirerError> {
        let send = async {
            let answer = op.send(self.acquirer(op.payment().0)).await?;
            match O::refused_on_resend(&answer) {
                Some(code) if resend => Err(AcquirerError::Rejected(code.to_owned())),
                _ => Ok(answer),
            }
        };
        let call = (O::CALL, op.acquirer_key());
        self.holding_lease(lease, call, send, O::kind, trail).await
    }

    /// Looks up, holding the lease.
    async fn look_up_holding_lease<O: Movement>(
        &self,
        op: &O,
        lease: &Lease,
        trail: &Trail,
    ) -> Result<Option<O::Answer>, AcquirerError> {
        let look_up = op.look_up(self.acquirer(op.payment().0));
        let kind = |found: &Option<O::Answer>| {
            found
                .as_ref()
                .map_or(AcquirerOutcomeKind::NotFound, O::kind)
        };
        let call = (AcquirerCall::Lookup, op.acquirer_key());
        self.holding_lease(lease, call, look_up, kind, trail).await
    }
}

/// A look-up's own refusal proves nothing about the attempt looked for.
pub(super) fn rejected_look_up(error: AcquirerError) -> AcquirerError {
    match error {
        AcquirerError::Rejected(reason) => {
            AcquirerError::Unknown(format!("the look-up was refused: {reason}"))
        }
        other => other,
    }
}
