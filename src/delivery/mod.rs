//! Delivery: from the outbox to the customer's webhook.
//!
//! A claim loop takes due deliveries that head their conversation (so one
//! conversation's events arrive in order) in batches; each is sent by its own
//! task, bounded globally and per endpoint, behind the endpoint's circuit
//! breaker; outcomes are recorded in batches. No transaction is open during
//! an HTTP call.

pub mod attempt;
pub mod breaker;
pub mod client;
pub mod defaults;
pub mod fanout;
pub mod manual;
pub mod recorder;
pub mod reply;
pub mod retry;
pub mod router;
pub mod signing;
pub mod ssrf;
pub mod window;
pub mod worker;

pub use worker::{Dispatcher, spawn};
