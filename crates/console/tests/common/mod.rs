//! The service on real sockets (from the test kit) and its answers read
//! whole.

#![allow(unused_imports)]

pub use chargeonce_testkit::{
    Answer, Backend, OTHER_SECRET, OTHER_SHOP, SECRET, SHOP, TestService, WEBHOOK_SECRET, body,
    send,
};
