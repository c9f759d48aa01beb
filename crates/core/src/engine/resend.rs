//! The resend rule: **a refusal of a resend proves nothing while an earlier
//! attempt's outcome is unknown.**
//!
//! Providers answer a duplicate of an operation they are still processing
//! in their own ways: 409, 400 or 422 "in progress" or "duplicate", 208, or
//! a refusal that reads like any other. An acquirer that is idempotent on
//! our key may still do it while the first attempt runs. So a 4xx to a send
//! that is not the operation's first (the holder took the key over: an
//! earlier attempt may be in flight) is itself an unknown outcome:
//!
//! 1. the operation is looked up at once; what is found is the answer;
//! 2. nothing found: the key is parked for the settle window (in every mode:
//!    the first attempt may land late), and the client is answered 202;
//! 3. the next holder, once the window has passed, sees from the payment's
//!    history that the last send of this acquirer key was refused and the
//!    operation is still unsettled: it only looks the operation up, and
//!    sends nothing. Found: that is the answer. Nothing: the refusal is
//!    confirmed, the payment declined (its order free) or the refund failed.
//!
//! A first send's refusal is believed at once: nothing was sent before it.
//! The judgement here is pure; the engine reads the history and the trail.

use crate::history::{HistoryEntry, HistoryEvent};
use crate::observe::{AcquirerCall, AcquirerOutcomeKind};

/// Whether the last send (`send`: a charge or a refund call) among `calls`,
/// oldest first, was refused: a refusal that awaits its confirmation while
/// the operation is unsettled. Look-ups do not count: they send nothing.
pub(super) fn last_send_refused(
    calls: impl IntoIterator<Item = (AcquirerCall, AcquirerOutcomeKind)>,
    send: AcquirerCall,
) -> bool {
    calls
        .into_iter()
        .filter(|(call, _)| *call == send)
        .last()
        .is_some_and(|(_, outcome)| outcome == AcquirerOutcomeKind::Refused)
}

/// The acquirer calls of one acquirer key in a payment's history, oldest
/// first.
pub(super) fn calls_of<'a>(
    history: &'a [HistoryEntry],
    acquirer_key: &'a str,
) -> impl Iterator<Item = (AcquirerCall, AcquirerOutcomeKind)> + 'a {
    history.iter().filter_map(move |entry| match &entry.event {
        HistoryEvent::AcquirerCall {
            call,
            outcome,
            acquirer_key: key,
            ..
        } if key == acquirer_key => Some((*call, *outcome)),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use AcquirerCall::{Charge, Lookup, Refund};
    use AcquirerOutcomeKind::{Declined, NotFound, Refused, Succeeded, Unknown};

    #[test]
    fn only_a_refused_last_send_awaits_confirmation() {
        assert!(!last_send_refused([], Charge), "nothing sent");
        assert!(!last_send_refused([(Charge, Unknown)], Charge));
        assert!(last_send_refused(
            [(Charge, Unknown), (Charge, Refused)],
            Charge
        ));
        assert!(
            last_send_refused(
                [(Charge, Unknown), (Charge, Refused), (Lookup, NotFound)],
                Charge
            ),
            "a look-up sends nothing"
        );
        assert!(
            !last_send_refused([(Charge, Refused), (Charge, Unknown)], Charge),
            "sent again after the refusal"
        );
        assert!(!last_send_refused(
            [(Charge, Refused), (Charge, Succeeded)],
            Charge
        ));
        assert!(
            !last_send_refused([(Charge, Unknown), (Charge, Declined)], Charge),
            "a card declined is an answer, not a refusal"
        );
        assert!(
            !last_send_refused([(Refund, Refused)], Charge),
            "another operation's calls"
        );
        assert!(last_send_refused(
            [(Refund, Unknown), (Refund, Refused)],
            Refund
        ));
    }
}
