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
//! Some definite-looking answers are refusals of this kind when they answer
//! a resend (a capture's "authorization closed", a refund's "exceeds the
//! charge": the attempt resumed may be what closed it): the engine records
//! them as refused, with their code as the reason, and the rule confirms
//! them the same way; confirmed, the operation fails with that code. Before
//! the rule covered them, such a capture stayed pending for ever: every
//! holder looked up, sent again and was refused again.
//!
//! A first send's refusal is believed at once: nothing was sent before it.
//! The judgement here is pure; the engine reads the history and the trail.

use crate::history::{HistoryEntry, HistoryEvent};
use crate::observe::{AcquirerCall, AcquirerOutcomeKind};

/// One acquirer call as the rule reads it: which call, how it ended, and
/// the refusal's reason (empty when none was recorded).
pub(super) type Call<'a> = (AcquirerCall, AcquirerOutcomeKind, &'a str);

/// The refusal that awaits its confirmation while the operation is
/// unsettled: the reason of the last send (`send`: the movement's call)
/// among `calls`, oldest first, if that send was refused. Look-ups do not
/// count: they send nothing.
pub(super) fn refusal_awaiting<'a>(
    calls: impl IntoIterator<Item = Call<'a>>,
    send: AcquirerCall,
) -> Option<&'a str> {
    calls
        .into_iter()
        .filter(|(call, _, _)| *call == send)
        .last()
        .filter(|(_, outcome, _)| *outcome == AcquirerOutcomeKind::Refused)
        .map(|(_, _, reason)| reason)
}

/// The acquirer calls of one acquirer key in a payment's history, oldest
/// first.
pub(super) fn calls_of<'a>(
    history: &'a [HistoryEntry],
    acquirer_key: &'a str,
) -> impl Iterator<Item = Call<'a>> + 'a {
    history.iter().filter_map(move |entry| match &entry.event {
        HistoryEvent::AcquirerCall {
            call,
            outcome,
            acquirer_key: key,
            reason,
            ..
        } if key == acquirer_key => Some((*call, *outcome, reason.as_deref().unwrap_or(""))),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use AcquirerCall::{Capture, Charge, Lookup, Refund};
    use AcquirerOutcomeKind::{Declined, NotFound, Refused, Succeeded, Unknown};

    /// Whether the last send among `calls` (with no reasons) was refused.
    fn last_send_refused<const N: usize>(
        calls: [(AcquirerCall, AcquirerOutcomeKind); N],
        send: AcquirerCall,
    ) -> bool {
        refusal_awaiting(calls.map(|(call, outcome)| (call, outcome, "")), send).is_some()
    }

    #[test]
    fn the_refusal_awaiting_carries_its_reason() {
        let calls = [
            (Capture, Unknown, "connection reset"),
            (Lookup, NotFound, ""),
            (Capture, Refused, "authorization_closed"),
        ];
        assert_eq!(
            refusal_awaiting(calls, Capture),
            Some("authorization_closed")
        );
    }

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
