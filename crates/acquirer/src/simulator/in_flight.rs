//! The keys in flight at the simulator: a charge whose first request has
//! not recorded yet, so a duplicate of it can be told (and answered as
//! [`InFlightDuplicate`] says).

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

#[cfg(doc)]
use crate::InFlightDuplicate;

/// The acquirer keys whose first request has not recorded its charge yet.
#[derive(Debug, Default, Clone)]
pub(crate) struct InFlight(Arc<Mutex<HashSet<String>>>);

impl InFlight {
    /// Marks `key` in flight until the guard is dropped; `None` when it is
    /// in flight already (a duplicate).
    pub(crate) fn enter(&self, key: &str) -> Option<InFlightGuard> {
        let mut keys = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        keys.insert(key.to_owned()).then(|| InFlightGuard {
            keys: self.clone(),
            key: key.to_owned(),
        })
    }
}

/// A key in flight; dropped when its charge is recorded (or given up).
#[derive(Debug)]
pub(crate) struct InFlightGuard {
    keys: InFlight,
    key: String,
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.keys
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_in_flight_until_its_guard_is_dropped() {
        let keys = InFlight::default();
        let first = keys.enter("k").expect("first");
        assert!(keys.enter("k").is_none(), "a duplicate");
        assert!(keys.enter("other").is_some());
        drop(first);
        assert!(keys.enter("k").is_some(), "recorded: no longer in flight");
    }
}
