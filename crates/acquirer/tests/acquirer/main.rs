//! Integration tests of the acquirer simulator: one test binary, small modules.

#![allow(clippy::unwrap_used)]

mod behaviour;
mod captures;
mod common;
mod concurrency;
mod http;
mod http_captures;
mod standalone;
