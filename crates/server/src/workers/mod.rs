//! Background workers that keep the store tidy and drive work to an end.

pub mod completer;
pub mod reconciler;
pub mod sweeper;
