//! Every reachable state of a small hold, and every move from each: the
//! money invariants hold in all of them.

use std::collections::{HashSet, VecDeque};

use super::*;

/// What the walk tracks beside the hold: the captures in flight (sorted,
/// so equal states meet) and the sum of the captures that succeeded.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct World {
    hold: Authorization,
    in_flight: Vec<(i64, bool)>,
    captured: i64,
}

const AUTHORIZED: i64 = 6;

fn asks() -> Vec<CaptureAsk> {
    vec![
        CaptureAsk::part(1),
        CaptureAsk::part(2),
        CaptureAsk::part(AUTHORIZED + 1),
        CaptureAsk::part(0),
        CaptureAsk::last(1),
        CaptureAsk::last(3),
        CaptureAsk::rest(),
    ]
}

fn is_final(hold: Hold) -> bool {
    matches!(hold, Hold::Captured | Hold::Released(_))
}

/// The invariants of one state.
fn check(w: &World) {
    let a = &w.hold;
    assert!(
        a.captured_minor() + a.in_flight_minor() <= a.authorized_minor(),
        "{w:?}"
    );
    assert_eq!(
        a.in_flight_minor(),
        w.in_flight.iter().map(|(m, _)| m).sum::<i64>(),
        "{w:?}"
    );
    assert_eq!(a.in_flight() as usize, w.in_flight.len(), "{w:?}");
    assert_eq!(a.captured_minor(), w.captured, "{w:?}");
    assert!(a.capturable_minor() >= 0, "{w:?}");
    assert_eq!(a.refundable_minor(0), a.captured_minor());
    if matches!(
        a.hold(),
        Hold::Releasing(_) | Hold::Released(_) | Hold::Captured
    ) {
        assert!(
            w.in_flight.is_empty(),
            "nothing in flight once released or closed: {w:?}"
        );
    }
    let last_in_flight = w.in_flight.iter().filter(|(_, last)| *last).count();
    assert!(last_in_flight <= 1, "one last capture at a time: {w:?}");
    assert_eq!(
        last_in_flight == 1,
        a.hold() == Hold::Closing && last_in_flight == 1,
        "{w:?}"
    );
    match a.status() {
        AuthorizationStatus::Voided => {
            assert_eq!(
                (a.captured_minor(), a.hold()),
                (0, Hold::Released(ReleaseReason::Void))
            )
        }
        AuthorizationStatus::Expired => {
            assert_eq!(
                (a.captured_minor(), a.hold()),
                (0, Hold::Released(ReleaseReason::Expiry))
            )
        }
        AuthorizationStatus::Authorized => assert_eq!(a.captured_minor(), 0),
        AuthorizationStatus::PartiallyCaptured => assert!(!is_final(a.hold())),
        AuthorizationStatus::Succeeded => assert!(is_final(a.hold()) && a.captured_minor() > 0),
    }
}

/// Every state reachable from `w` in one move.
fn moves(w: &World) -> Vec<World> {
    let a = w.hold;
    let mut next = Vec::new();
    for ask in asks() {
        match a.reserve_capture(ask) {
            Ok((b, r)) => {
                assert_eq!(a.hold(), Hold::Open, "accepted only while open");
                assert!(r.amount_minor() > 0 && r.amount_minor() <= a.capturable_minor());
                let mut in_flight = w.in_flight.clone();
                in_flight.push((r.amount_minor(), r.is_last()));
                in_flight.sort_unstable();
                next.push(World {
                    hold: b,
                    in_flight,
                    captured: w.captured,
                });
            }
            Err(CaptureRefusal::Closed(_)) => assert!(is_final(a.hold())),
            Err(CaptureRefusal::InProgress) => {
                assert!(matches!(a.hold(), Hold::Closing | Hold::Releasing(_)))
            }
            Err(CaptureRefusal::NotPositive) => {}
            Err(CaptureRefusal::ExceedsCapturable { capturable_minor }) => {
                assert_eq!(capturable_minor, a.capturable_minor())
            }
        }
    }
    for (i, &(amount, last)) in w.in_flight.iter().enumerate() {
        for succeeded in [true, false] {
            let r = CaptureReservation {
                amount_minor: amount,
                last,
            };
            let mut in_flight = w.in_flight.clone();
            in_flight.remove(i);
            next.push(World {
                hold: a.capture_settled(r, succeeded),
                in_flight,
                captured: w.captured + if succeeded { amount } else { 0 },
            });
        }
    }
    for reason in [ReleaseReason::Void, ReleaseReason::Expiry] {
        match a.request_release(reason) {
            Ok((b, plan)) => {
                assert!(w.in_flight.is_empty(), "a release never races a capture");
                assert_eq!(
                    plan.release_minor,
                    a.authorized_minor() - a.captured_minor()
                );
                next.push(World {
                    hold: b,
                    ..w.clone()
                });
            }
            Err(ReleaseRefusal::CapturesInProgress) => assert!(!w.in_flight.is_empty()),
            Err(ReleaseRefusal::ReleaseInProgress) => {
                assert!(matches!(a.hold(), Hold::Releasing(_)))
            }
            Err(ReleaseRefusal::Closed(_)) => assert!(is_final(a.hold())),
        }
    }
    if matches!(a.hold(), Hold::Releasing(_)) {
        for succeeded in [true, false] {
            next.push(World {
                hold: a.release_settled(succeeded),
                ..w.clone()
            });
        }
    }
    next
}

#[test]
fn every_order_of_captures_and_releases_keeps_the_money_invariants() {
    let start = World {
        hold: Authorization::new(AUTHORIZED),
        in_flight: Vec::new(),
        captured: 0,
    };
    let mut seen = HashSet::from([start.clone()]);
    let mut queue = VecDeque::from([start]);
    let mut finals = HashSet::new();
    while let Some(w) = queue.pop_front() {
        check(&w);
        for n in moves(&w) {
            check(&n);
            if is_final(w.hold.hold()) {
                assert_eq!(n.hold, w.hold, "a closed hold never moves again");
            }
            if seen.insert(n.clone()) {
                queue.push_back(n);
            }
        }
        if is_final(w.hold.hold()) {
            finals.insert((w.hold.status(), w.hold.captured_minor()));
        }
    }
    // The walk reached every kind of ending: captured in full or in part,
    // voided, expired, and released after partial captures.
    for status in [
        AuthorizationStatus::Succeeded,
        AuthorizationStatus::Voided,
        AuthorizationStatus::Expired,
    ] {
        assert!(
            finals.iter().any(|(s, _)| *s == status),
            "{status:?} never reached"
        );
    }
    for captured in 1..=AUTHORIZED {
        assert!(
            finals.contains(&(AuthorizationStatus::Succeeded, captured)),
            "never ended with {captured} captured"
        );
    }
    // 6 minor units and these asks reach 187 states; fewer means a move went missing.
    assert!(
        seen.len() >= 187,
        "the walk is not trivial: {} states",
        seen.len()
    );
}

#[test]
fn two_shipments_then_a_void_of_nothing_left() {
    let hold = Authorization::new(150_000);
    let (hold, one) = hold.reserve_capture(CaptureAsk::part(100_000)).unwrap();
    // A void while a capture is in flight waits for it.
    assert_eq!(
        hold.request_release(ReleaseReason::Void),
        Err(ReleaseRefusal::CapturesInProgress)
    );
    let hold = hold.capture_settled(one, true);
    let (hold, two) = hold.reserve_capture(CaptureAsk::part(50_000)).unwrap();
    let hold = hold.capture_settled(two, true);
    assert_eq!(hold.status(), AuthorizationStatus::Succeeded);
    assert_eq!(
        hold.request_release(ReleaseReason::Void),
        Err(ReleaseRefusal::Closed(AuthorizationStatus::Succeeded))
    );
    assert_eq!(hold.refundable_minor(20_000), 130_000);
}

#[test]
fn a_void_after_a_partial_capture_succeeds_the_payment_and_releases_the_rest() {
    let hold = Authorization::new(1_000);
    let (hold, part) = hold.reserve_capture(CaptureAsk::part(300)).unwrap();
    let hold = hold.capture_settled(part, true);
    let (hold, plan) = hold.request_release(ReleaseReason::Void).unwrap();
    assert_eq!(plan.release_minor, 700);
    assert_eq!(
        hold.reserve_capture(CaptureAsk::part(1)),
        Err(CaptureRefusal::InProgress)
    );
    let hold = hold.release_settled(true);
    assert_eq!(hold.status(), AuthorizationStatus::Succeeded);
    assert_eq!(hold.captured_minor(), 300);
    assert_eq!(
        hold.reserve_capture(CaptureAsk::rest()),
        Err(CaptureRefusal::Closed(AuthorizationStatus::Succeeded))
    );
}

#[test]
fn a_refused_last_capture_reopens_the_hold() {
    let hold = Authorization::new(1_000);
    let (hold, last) = hold.reserve_capture(CaptureAsk::last(400)).unwrap();
    assert_eq!(hold.capturable_minor(), 0);
    assert_eq!(
        hold.reserve_capture(CaptureAsk::part(1)),
        Err(CaptureRefusal::InProgress)
    );
    let hold = hold.capture_settled(last, false);
    assert_eq!(hold.status(), AuthorizationStatus::Authorized);
    assert_eq!(hold.capturable_minor(), 1_000);
}

#[test]
fn capture_methods_read_back() {
    for m in [CaptureMethod::Automatic, CaptureMethod::Manual] {
        assert_eq!(CaptureMethod::parse(m.as_str()), Some(m));
    }
    assert_eq!(CaptureMethod::parse("later"), None);
}
