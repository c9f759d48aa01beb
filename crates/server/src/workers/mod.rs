//! Background workers that keep the store tidy, drive work to an end and
//! deliver merchant events.

pub mod completer;
pub mod reconciler;
pub mod relay;
pub mod sweeper;
